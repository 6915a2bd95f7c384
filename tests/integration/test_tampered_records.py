"""Issue 67, item 3: a stored trial record is input, read back as such. A record rewritten
in the database (through Optuna's own storage, as anyone with write access can) is skipped
by every reader with one warning naming the trial, and no reader raises:

- rates in a stored curve that no ladder measures (infinite, NaN, negative, 1e308) once
  made `tuner best` answer "capacity inf req/s" with a ready `vllm serve` line;
- a wrong JSON type in one record once gave a traceback in `tuner best`, `pareto`,
  `report` and `status`, and a plain-text 500 from the API's `GET /studies` for every study;
- a curve of 300,000 levels once held `tuner report` for minutes.

Real `tuner` processes, a real `tuner api` over HTTP on loopback, SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import math

import optuna
import pytest

from tuner.storage.registry import PREFIX
from tuner.testing.api_procs import api_process
from tuner.testing.capacity_studies import make_capacity_study
from tuner.testing.cli_fork import run_tuner
from tuner.testing.studies import make_study
from tuner.testing.tampered import add_tampered

from tests.integration.test_api_http import get

# The fixture's trial 1 holds its SLOs up to 8 req/s: the most capacity.
BEST = "trial 1: capacity "


def _tamper_curve(study: optuna.Study, rates) -> int:
    """A copy of trial 1 whose curve's offered rates are ``rates``: its number."""
    curve = json.loads(json.dumps(study.trials[1].user_attrs["curve"]))
    for level, rate in zip(curve["levels"], rates):
        level["offered_rps"] = rate
    return add_tampered(study, 1, curve=curve)


def _skipped(stderr: str, number: int) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"skipping trial {number} ")]


@pytest.mark.parametrize("rates", [
    (4.0, 8.0, math.inf), (4.0, 1e308, 1e309), (4.0, 8.0, math.nan), (-4.0, -8.0, 12.0)],
    ids=["inf", "1e308", "nan", "negative"])
def test_a_curve_out_of_range_is_skipped_by_tuner_best(storage_url, rates):
    opened = make_capacity_study(storage_url)
    bad = _tamper_curve(opened.study, rates)
    out = run_tuner(["best", opened.spec.name, "--storage", storage_url])
    assert out.returncode == 0, out.stderr
    assert f"# {BEST}" in out.stderr and out.stdout.startswith("vllm serve"), out.stderr
    answer = "\n".join(line for line in out.stderr.splitlines() if "skipping" not in line)
    assert not any(word in answer for word in ("inf", "nan", "e+30", "Traceback")), answer
    warned = _skipped(out.stderr, bad)
    assert len(warned) == 1 and "offered_rps" in warned[0], out.stderr


def _wrong_type_study(storage_url: str) -> tuple[str, int]:
    opened = make_capacity_study(storage_url)
    return opened.spec.name, add_tampered(opened.study, 1, curve={"levels": "fast"},
                                          server={"preemptions": "many"})


def test_a_wrong_json_type_is_skipped_by_every_cli_reader(storage_url, tmp_path):
    name, bad = _wrong_type_study(storage_url)
    commands = {"best": [], "pareto": [], "report": ["-o", tmp_path / "r.html"],
                "status": ["--once"]}
    for command, more in commands.items():
        out = run_tuner([command, name, "--storage", storage_url, *more])
        assert out.returncode == 0 and "Traceback" not in out.stderr, (command, out.stderr)
        assert len(_skipped(out.stderr, bad)) == 1, (command, out.stderr)
    assert (tmp_path / "r.html").stat().st_size > 0
    out = run_tuner(["status", name, "--storage", storage_url, "--json"])
    assert json.loads(out.stdout)["counted"] == 3  # the three measured, not the tampered


def test_a_wrong_json_type_leaves_the_api_answering(storage_url, tmp_path):
    name, bad = _wrong_type_study(storage_url)
    plain = make_study(storage_url, "mixed", n=4).spec.name
    with api_process(storage_url, tmp_path / "api.log") as base:
        status, kind, body = get(f"{base}/studies")
        assert status == 200 and kind.startswith("application/json"), body
        assert sorted(s["study"] for s in json.loads(body)["studies"]) == sorted([name, plain])
        for path in ("", "/pareto", "/best?format=json"):
            status, kind, body = get(f"{base}/studies/{name}{path}")
            assert status == 200 and kind.startswith("application/json"), (path, body)
        assert json.loads(body)["trial"] == 1
    assert len(_skipped((tmp_path / "api.log").read_text(), bad)) == 1  # once per trial


def test_an_unreadable_study_is_a_json_500_and_the_others_still_list(storage_url, tmp_path):
    good = make_study(storage_url, "mixed", n=4).spec.name
    broken = make_study(storage_url, "mixed", n=4, name="broken").spec.name
    study = optuna.load_study(study_name=broken, storage=storage_url)
    study.set_user_attr(PREFIX + "w1", {"heartbeat": "soon", "state": "running"})
    with api_process(storage_url, tmp_path / "api.log") as base:
        status, kind, body = get(f"{base}/studies/{broken}")
        assert status == 500 and kind.startswith("application/json"), body
        error = json.loads(body)["error"]
        assert "\n" not in error and "ValueError" in error, error
        status, _, body = get(f"{base}/studies")
        assert status == 200, body
        assert [s["study"] for s in json.loads(body)["studies"]] == [good]
    assert "Traceback" in (tmp_path / "api.log").read_text()  # logged, not answered


def test_a_curve_of_300000_levels_is_refused_at_read(storage_url, tmp_path):
    opened = make_capacity_study(storage_url)
    levels = [{"offered_rps": 1.0 + i, "held": True} for i in range(300_000)]
    bad = add_tampered(opened.study, 1, curve={"levels": levels, "tolerance": 0.05})
    out = run_tuner(["report", opened.spec.name, "--storage", storage_url,
                     "-o", tmp_path / "r.html"], timeout=600)
    assert out.returncode == 0, out.stderr
    warned = _skipped(out.stderr, bad)
    assert len(warned) == 1 and "300000 levels" in warned[0], out.stderr
