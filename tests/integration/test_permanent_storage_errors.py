"""Storage errors that waiting does not mend (issue 47, case 5): a read-only SQLite file
or folder, a full disk. Real SQLite, real `tuner` processes: exit 1 with one line at once,
never "storage unreachable, retrying" for the whole retry budget."""

import os

import pytest
import sqlalchemy

from tuner.errors import StorageError, StorageUnreachable
from tuner.storage import create_study, load_study_file
from tuner.storage.outage import retrying, transient
from tuner.testing.readonly import read_only
from tuner.testing.cli_fork import run_tuner

ENDS_WITHIN_S = 120  # without the fix a worker retries for six hours

STUDY = '''{name}
[model]
path = "models/llama3-8b"
[workload]
input_len = 256
output_len = 32
num_requests = 20
[slo]
p99_itl_ms = 200
[search]
n_trials = 2
[engine]
kind = "sim"
'''


def _tuner(*args, home):
    return run_tuner(args, timeout=ENDS_WITHIN_S, env={**os.environ, "TUNER_HOME": str(home)})


def _last_line(done) -> str:
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "retrying" not in done.stderr, (
        done.stderr[-3000:])
    return done.stderr.strip().splitlines()[-1]


def test_a_full_disk_is_reported_at_once_not_waited_out(tmp_path):
    (tmp_path / "tuner.db").symlink_to("/dev/full")  # every write: no space left on device
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'tuner.db'}")

    def write():
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")

    slept = []
    with pytest.raises(StorageError, match="disk is full") as caught:
        retrying(write, budget=60, sleep=slept.append, clock=lambda: sum(slept))
    assert slept == [] and not isinstance(caught.value, StorageUnreachable)
    assert not transient(caught.value.__cause__)


@pytest.mark.parametrize("which, says", [("file", "attempt to write a readonly database"),
                                         ("folder", "unable to open database file")])
def test_read_only_sqlite_ends_worker_and_create_with_one_line(which, says, study_file,
                                                                tmp_path):
    folder = tmp_path / "db"
    folder.mkdir()
    url = f"sqlite:///{folder / 'tuner.db'}"
    create_study(load_study_file(study_file(STUDY.format(name=""), "s.toml")), url)
    other = study_file(STUDY.format(name='name = "other"'), "other.toml")
    with read_only(folder / "tuner.db" if which == "file" else folder) as why:
        if why:
            pytest.skip(why)
        worker = _last_line(_tuner("worker", "s", "--storage", url, home=tmp_path))
        created = _last_line(_tuner("study", "create", other, "--storage", url,
                                    home=tmp_path))
    for line in (worker, created):
        assert line == f"tuner: error: storage error: {says}", line
