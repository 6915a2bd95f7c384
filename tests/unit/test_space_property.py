"""Property tests: no proposal that breaks a rule survives repair, on every example study
and both rule sets, while every boolean combination and both ends of every range stay
reachable."""

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tuner.space import build_space, repair
from tuner.storage import load_study_file
from tuner.testing.examples import ready_study_files

STUDIES = ready_study_files()  # the template has placeholders (test_first_hour_cli)
BOOLS = ("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager")


def space_for(path: Path, rules: str, tmp_path: Path):
    text = re.sub(r'(?m)^rules = ".*"$', f'rules = "{rules}"', path.read_text())
    if 'rules = "' not in text:
        text += f'\n[space]\nrules = "{rules}"\n'
    copy = tmp_path / f"{path.stem}-{rules}.toml"
    copy.write_text(text.replace('path = "models/', f'path = "{path.parent}/models/')
                        .replace('path = "../.tuner', f'path = "{path.parent}/../.tuner'))
    return build_space(load_study_file(copy))


def strategy(p):
    if p.kind == "bool":
        return st.booleans()
    if p.kind == "choice":
        return st.sampled_from(p.choices)
    if p.kind == "int":
        return st.integers(int(p.low), int(p.high))
    return st.floats(p.low, p.high)


CASES = [(s, r) for s in STUDIES for r in ("article", "vllm-v1")]


@pytest.mark.parametrize("path,rules", CASES, ids=[f"{s.stem}-{r}" for s, r in CASES])
def test_repaired_proposals_break_no_rule(path, rules, tmp_path):
    space = space_for(path, rules, tmp_path)
    proposals = st.fixed_dictionaries({p.name: strategy(p) for p in space.params})

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(proposals)
    def check(raw):
        fixed = repair(space, space.complete(raw))
        if fixed.infeasible:
            return
        assert space.rules.violations(fixed.flags, space.context) == []
        assert space.contains(fixed.flags)
        assert repair(space, fixed.flags).flags == fixed.flags  # idempotent
        on_grid = all(raw[n] in g for n, g in space.grids.items())
        if on_grid and not space.rules.violations(space.complete(raw), space.context):
            assert fixed.flags == space.complete(raw)  # valid proposals untouched

    check()


@pytest.mark.parametrize("path,rules", CASES, ids=[f"{s.stem}-{r}" for s, r in CASES])
def test_every_boolean_combination_and_range_end_stays_reachable(path, rules, tmp_path):
    space = space_for(path, rules, tmp_path)
    tuned_bools = [b for b in BOOLS if space.param(b)]
    for combo in itertools.product((False, True), repeat=len(tuned_bools)):
        wanted = dict(zip(tuned_bools, combo))
        if rules == "article" and wanted.get("enable_prefix_caching") and wanted.get(
                "enable_chunked_prefill"):
            continue  # the one combination the article forbids
        assert _reach(space, wanted), f"cannot reach {wanted}"
    for p in space.params:
        if p.kind in ("int", "float"):
            for end in (p.low, p.high):
                assert _reach(space, {p.name: end}), f"cannot reach {p.name}={end}"
        elif p.kind == "choice":
            for c in p.choices:
                assert _reach(space, {p.name: c}), f"cannot reach {p.name}={c}"


def _reach(space, wanted):
    """Some proposal holding ``wanted`` is valid as it is (so repair keeps it)."""
    import random

    from tuner.space.draw import draw

    rng = random.Random(0)
    for _ in range(3000):
        raw = {**draw(space, rng), **wanted}
        fixed = repair(space, raw)
        if fixed.infeasible is None and all(fixed.flags[k] == v for k, v in wanted.items()):
            return True
    return False
