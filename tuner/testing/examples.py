"""The example study files in the checkout's studies/: those tests load as they are, and
the template, whose <...> placeholders its own test fills (``fill_template``)."""

from __future__ import annotations

from pathlib import Path

STUDIES_DIR = Path(__file__).resolve().parents[2] / "studies"
TEMPLATE = STUDIES_DIR / "template.toml"


def ready_study_files() -> list[Path]:
    """Every studies/*.toml but the template."""
    return sorted(p for p in STUDIES_DIR.glob("*.toml") if p != TEMPLATE)


def fill_template(values: dict[str, str]) -> str:
    """The template's text with each ``<KEY>`` replaced by ``values[KEY]``."""
    text = TEMPLATE.read_text()
    for key, value in values.items():
        text = text.replace(f"<{key}>", value)
    return text
