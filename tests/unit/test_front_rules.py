"""Every rule of the front sampler is a switch that is on by default and that the sampler
reads (a switch nothing reads would ablate nothing: bench/search_ablation.py)."""

from pathlib import Path

from tuner.search.front import FrontSettings
from tuner.trials.reference import ReferenceRule

PACKAGE = Path(__file__).resolve().parents[2] / "tuner" / "search" / "front"


def test_every_rule_is_on_by_default():
    rules = FrontSettings.rules()
    assert "mirrored_probes" in rules and "repair_candidates" in rules
    settings = FrontSettings(ReferenceRule(()))
    assert all(getattr(settings, r) is True for r in rules)


def test_every_rule_is_read_outside_the_settings():
    code = "".join(p.read_text() for p in PACKAGE.glob("*.py") if p.name != "settings.py")
    unread = [r for r in FrontSettings.rules() if f".{r}" not in code]
    assert unread == []
