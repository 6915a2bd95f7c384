"""The CLI's one log handler: messages on stderr at INFO, -q keeps warnings only, -v adds
debug lines; a command's output on stdout is the same at every level."""

import logging


def test_quiet_and_verbose_set_the_level(run_cli, tmp_path):
    code, out, err = run_cli("model", "make", tmp_path / "a", "--shape", "tiny")
    assert code == 0 and out.strip() == str(tmp_path / "a") and "--load-format dummy" in err
    code, out, err = run_cli("-q", "model", "make", tmp_path / "b", "--shape", "tiny")
    assert code == 0 and out.strip() == str(tmp_path / "b") and err == ""
    code, _, _ = run_cli("-v", "model", "make", tmp_path / "c", "--shape", "tiny")
    assert code == 0 and logging.getLogger("tuner.runner.worker").isEnabledFor(logging.DEBUG)
    run_cli("model", "make", tmp_path / "d", "--shape", "tiny")
    assert not logging.getLogger("tuner.runner.worker").isEnabledFor(logging.DEBUG)


def test_quiet_and_verbose_together_is_a_usage_error(run_cli):
    code, _, err = run_cli("-q", "-v", "study", "list")
    assert code == 2 and "not allowed with argument" in err
