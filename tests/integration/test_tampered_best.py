"""Issue 67, item 6: a told trial's stored flags, rewritten in the database (anyone with
the database login, or the dashboard before its guard), outside the catalogue. `tuner best`
and the API's best, real processes on SQLite and PostgreSQL, skip that trial with one
warning naming it and answer with another, on a plain study and on a capacity study;
neither prints the rewritten flags as a ready `vllm serve` line.

Before: the rewritten flags were the answer (the check a worker makes of a stored launch,
``launch_problem``, was not made of a record read back)."""

from __future__ import annotations

import json
import os
import urllib.request

import optuna
import pytest
import sqlalchemy

from tuner.testing.api_procs import api_process
from tuner.testing.capacity_studies import make_capacity_study
from tuner.testing.cli_fork import run_tuner
from tuner.testing.studies import make_study

pytestmark = pytest.mark.integration

# Out of the bounds vLLM accepts; a name outside the catalogue (a flag to run the model's
# own code); a lossy value in a study that did not opt in to it.
REWRITES = ({"gpu_memory_utilization": 5},
            {"trust_remote_code": True},
            {"kv_cache_dtype": "fp8"})


def _store_flags(url: str, study: str, number: int, flags: dict) -> None:
    """What an UPDATE with the database login does to trial ``number``'s stored flags."""
    trial_id = optuna.load_study(study_name=study, storage=url).trials[number]._trial_id
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as db:
            done = db.execute(sqlalchemy.text(
                "UPDATE trial_user_attributes SET value_json = :v WHERE key = 'flags' AND "
                "trial_id = :t"), {"v": json.dumps(flags), "t": trial_id})
            assert done.rowcount == 1
    finally:
        engine.dispose()


def _best(name: str, url: str) -> tuple[int, dict, list[str]]:
    out = run_tuner(["best", name, "--storage", url, "--format", "json"], timeout=120,
                    env=dict(os.environ))
    return out.returncode, json.loads(out.stdout or "{}"), out.stderr.strip().splitlines()


def _api_best(base: str, name: str) -> dict:
    with urllib.request.urlopen(f"{base}/studies/{name}/best?format=json", timeout=60) as r:
        return json.loads(r.read())


def _skipped_once(lines: list[str], number: int, study: str) -> None:
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"skipping trial {number} of study {study!r}: its stored "
                               "flags are not a configuration vLLM accepts"), lines


@pytest.mark.parametrize("kind", ["plain", "capacity"])
def test_best_skips_a_trial_whose_stored_flags_were_rewritten(storage_url, tmp_path, kind):
    opened = (make_study(storage_url, "mixed") if kind == "plain"
              else make_capacity_study(storage_url))
    name = opened.spec.name
    code, first, lines = _best(name, storage_url)
    assert code == 0 and lines == [], lines
    chosen, flags = first["trial"], first["flags"]
    # a study that opted in to lossy kv_cache_dtype may store fp8: no rewrite there
    rewrites = [c for c in REWRITES if not set(c) & set(opened.space.lossy)]
    assert len(rewrites) >= 2
    log = tmp_path / "api.log"
    with api_process(storage_url, log) as base:
        for change in rewrites:
            _store_flags(storage_url, name, chosen, {**flags, **change})
            code, doc, lines = _best(name, storage_url)
            assert code == 0 and doc["trial"] != chosen, (change, doc.get("trial"))
            assert doc["flags"] != {**flags, **change}
            _skipped_once(lines, chosen, name)
            assert _api_best(base, name) == doc
        _store_flags(storage_url, name, chosen, flags)  # put back: the answer is back
        code, again, lines = _best(name, storage_url)
        assert code == 0 and again == first and lines == []
        assert _api_best(base, name) == first
    warned = [line for line in log.read_text().splitlines() if "skipping" in line]
    _skipped_once(warned, chosen, name)  # once per trial and process, however often asked
