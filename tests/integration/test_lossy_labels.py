"""Labels on a stored study whose fp8 trials passed the accuracy guard (the fixture's scripted
figures): `tuner pareto` marks them, `tuner best` (three formats) names the lossy flag and
its figures, the report too."""

import json

from tuner.testing.studies import make_study


def test_lossy_trials_that_passed_are_labelled_everywhere(storage_url, run_cli, tmp_path):
    name = make_study(storage_url, "mixed").spec.name
    code, out, err = run_cli("pareto", name, "--storage", storage_url)
    assert code == 0, err
    assert "--kv-cache-dtype fp8 [lossy]" in out
    assert "LOSSY kv_cache_dtype=fp8: token agreement 0.984" in out and "passed" in out
    code, out, err = run_cli("best", name, "--storage", storage_url, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["lossy_flags"] == {"kv_cache_dtype": "fp8"}, doc["flags"]
    assert doc["accuracy"]["token_agreement"] == 0.984 and doc["meets_accuracy"] is True
    code, out, err = run_cli("best", name, "--storage", storage_url, "--format", "cli")
    assert code == 0 and "LOSSY kv_cache_dtype=fp8" in err  # stdout stays one runnable line
    assert len(out.splitlines()) == 1 and "--kv-cache-dtype fp8" in out
    code, out, err = run_cli("best", name, "--storage", storage_url, "--format", "yaml")
    assert code == 0 and "# " in out and "LOSSY kv_cache_dtype=fp8" in out
    code, _, err = run_cli("report", name, "--storage", storage_url, "-o", tmp_path / "r.html")
    assert code == 0 and "LOSSY kv_cache_dtype=fp8" in (tmp_path / "r.html").read_text()
