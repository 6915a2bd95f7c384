"""Ports reserved among a box's workers: a port another process holds is drawn again, and
its lock goes with its holder (real processes, real flocks)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tuner.engine.ports import free_port, reserved_port
from tuner.errors import LaunchError

HOLDER = textwrap.dedent('''
    import sys
    from pathlib import Path
    from tuner.engine.ports import reserved_port
    with reserved_port(folder=Path(sys.argv[1])) as port:
        print(port, flush=True)
        sys.stdin.read()  # held until the test closes our stdin, or kills us
''')


def holder(folder):
    """A process that reserves a port in ``folder``; (process, its port)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), proc.communicate(timeout=30)
    return proc, int(line)


def test_a_port_held_by_another_process_is_drawn_again(tmp_path):
    proc, held = holder(tmp_path)
    try:
        other = free_port()
        draws = iter([held, held, other])
        with reserved_port(lambda: next(draws), tmp_path) as port:
            assert port == other
            assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
                [f"{held}.lock", f"{other}.lock"])
        assert [p.name for p in tmp_path.iterdir()] == [f"{held}.lock"]
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert list(tmp_path.iterdir()) == []  # each holder removed its file


def test_a_killed_holders_port_can_be_reserved_at_once(tmp_path):
    proc, held = holder(tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    with reserved_port(lambda: held, tmp_path) as port:
        assert port == held
    assert list(tmp_path.iterdir()) == []


def test_only_held_ports_drawn_is_a_one_line_launch_error(tmp_path):
    proc, held = holder(tmp_path)
    try:
        with pytest.raises(LaunchError, match="ports drawn in a row are all held"):
            with reserved_port(lambda: held, tmp_path):
                pass
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_an_unwritable_lock_folder_names_tmpdir_the_setting_that_moves_it(tmp_path):
    # a file where the box's folder of port locks should be: no user, root included, can
    # make the folder there
    blocked = tmp_path / f"tuner-ports-{os.getuid()}"
    blocked.write_text("")
    code = ("from tuner.engine.ports import reserved_port\n"
            "with reserved_port(): pass\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("tuner.errors.LaunchError: cannot write the port locks in "
                           f"{blocked}:"), line
    assert line.endswith("set TMPDIR to a writable folder"), line
