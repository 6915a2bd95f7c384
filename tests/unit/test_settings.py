"""tuner.settings: every TUNER_* variable read in one place, with its default."""

import subprocess
import sys
from pathlib import Path

from tuner.settings import SIX_HOURS_S, Settings

# Imports every module of tuner (its test helpers and entry points aside) in a fresh
# interpreter whose settings() refuses to be called.
IMPORT_ALL = """
import importlib, pkgutil, tuner, tuner.settings
def refuse():
    raise AssertionError("settings() was called at import")
tuner.settings.settings = refuse
names = [m.name for m in pkgutil.walk_packages(tuner.__path__, "tuner.")
         if not m.name.startswith("tuner.testing") and not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def test_defaults_without_any_variable():
    s = Settings.from_env({})
    assert s.home == Path(".tuner").resolve() and s.storage is None and s.api_token is None
    assert s.heartbeat_s == 10 and s.storage_retry_s == SIX_HOURS_S


def test_each_variable_sets_its_field(tmp_path):
    s = Settings.from_env({"TUNER_HOME": str(tmp_path), "TUNER_STORAGE": "sqlite:///x.db",
                           "TUNER_STORAGE_FILE": "/run/secrets/url",
                           "TUNER_STORAGE_RETRY_S": "30", "TUNER_HEARTBEAT_S": "0",
                           "TUNER_API_TOKEN": " t0ken \n", "TUNER_VLLM_CPU_PYTHON": "/py",
                           "TUNER_TEST_PG": "postgresql://h/db"})
    assert s.home == tmp_path and s.storage == "sqlite:///x.db"
    assert s.storage_file == "/run/secrets/url" and s.storage_retry_s == 30.0
    assert s.heartbeat_s == 1  # at least one second
    assert s.api_token == "t0ken" and s.vllm_cpu_python == "/py"
    assert s.test_pg == "postgresql://h/db"


def test_a_retry_budget_that_is_not_a_number_keeps_the_default():
    assert Settings.from_env({"TUNER_STORAGE_RETRY_S": "soon"}).storage_retry_s == SIX_HOURS_S


def test_no_module_reads_the_settings_at_import():
    # A process forked from one that had imported tuner (a pre-imported worker, the suite's
    # forked commands) keeps whatever was read at import: it must read its own environment.
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) > 100  # the walk found the package's modules
