"""`GET /studies/{name}/best` on a capacity study answers as `tuner best` does: from the
stored curves, the same trial and the same text, `rate` included, over real HTTP on
loopback from a real `tuner api` process, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import urllib.parse

from tuner.testing.api_procs import api_process
from tuner.testing.capacity_studies import make_capacity_study
from tuner.testing.studies import make_study

from tests.integration.test_api_http import get

# (query, `tuner best` flags). Without limits the curves answer trial 1 and the saturated
# runs trial 0; at max_itl_p99=20 no saturated run qualifies (the API once said 422) while
# trial 2's curve holds it; rate=5 is trial 2's, rate=4 trial 0's.
ANSWERED = (
    ({}, []),
    ({"format": "json"}, ["--format", "json"]),
    ({"max_itl_p99": "20"}, ["--max-itl-p99", "20"]),
    ({"max_itl_p99": "20", "format": "json"}, ["--max-itl-p99", "20", "--format", "json"]),
    ({"rate": "5", "format": "yaml"}, ["--rate", "5", "--format", "yaml"]),
    ({"rate": "4", "format": "json", "prefer": "latency"},
     ["--rate", "4", "--format", "json", "--prefer", "latency"]),
)


def _best(base: str, name: str, query: dict) -> tuple[int, str]:
    status, _, body = get(f"{base}/studies/{name}/best?{urllib.parse.urlencode(query)}")
    return status, body


def test_best_on_a_capacity_study_equals_tuner_best(storage_url, tmp_path, run_cli):
    name = make_capacity_study(storage_url).spec.name
    plain = make_study(storage_url, "mixed", n=4).spec.name
    with api_process(storage_url, tmp_path / "api.log") as base:
        trials = {}
        for query, flags in ANSWERED:
            code, out, err = run_cli("best", name, "--storage", storage_url, *flags)
            assert code == 0, err
            status, body = _best(base, name, query)
            assert (status, body) == (200, out), query
            if query.get("format") == "json":
                trials[tuple(sorted(query.items()))] = json.loads(body)["trial"]
        assert sorted(trials.values()) == [0, 1, 2]  # the cases above differ, as meant

        # past the highest measured level: no answer from either, with the same reason
        code, _, err = run_cli("best", name, "--storage", storage_url, "--rate", "20")
        status, body = _best(base, name, {"rate": "20"})
        error = json.loads(body)["error"]
        assert code == 1 and status == 404 and "does not extrapolate" in error
        assert error in err

        # a bad rate: refused as the command refuses it, in one line
        for bad in ("fast", "0", "-1", "inf", "nan"):
            code, _, err = run_cli("best", name, "--storage", storage_url, "--rate", bad)
            status, body = _best(base, name, {"rate": bad})
            error = json.loads(body)["error"]
            assert code == 2 and status == 400 and "\n" not in error, (bad, error)
            assert error.startswith("rate: ") and error.removeprefix("rate: ") in err, err

        # a rate on a study that measures no ladder: the same usage error
        code, _, err = run_cli("best", plain, "--storage", storage_url, "--rate", "4")
        status, body = _best(base, plain, {"rate": "4"})
        error = json.loads(body)["error"]
        assert code == 2 and status == 400 and "measures no load ladder" in error
        assert error in err
