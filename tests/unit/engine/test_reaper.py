"""The reaper finds an embedded Ray's processes and ends them, also after the driver is SIGKILLed (no Ray)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from raysfl.engine.reaper import MARKER_VAR, kill_ray_processes, ray_pids

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux only)")

SLEEPER = "import sys, time; f = open(sys.argv[1], sys.argv[2]); print('ready', flush=True); time.sleep(120)"


def _sleeper(path: Path, mode: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, str(path), mode], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_finds_writers_into_the_session_and_marked_processes_only(tmp_path):
    # The owner is a stand-in driver, not this process: the test session's own Ray (started by this
    # process) writes under a session named after this process's pid and must be neither listed nor killed.
    owner = _sleeper(tmp_path / "owner.log", "a")
    logs = tmp_path / f"session_2026-01-01_00-00-00_000001_{owner.pid}" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text("")
    writer = _sleeper(logs / "raylet.out", "a")
    reader = _sleeper(logs / "raylet.out", "r")  # `tail -f` on a log: not Ray's
    other = tmp_path / "session_2026-01-01_00-00-00_000001_1" / "x.log"  # another driver's session
    other.parent.mkdir()
    stranger = _sleeper(other, "a")
    marked = _sleeper(tmp_path / "m.log", "a", env={**os.environ, MARKER_VAR: "m1"})
    try:
        found = ray_pids(owner.pid, "m1")
        assert writer.pid in found and marked.pid in found
        assert reader.pid not in found and stranger.pid not in found
        assert sorted(kill_ray_processes(owner.pid, "m1", grace_s=1.0)) == sorted([writer.pid, marked.pid])
        assert writer.wait(5) == -signal.SIGTERM and marked.wait(5) == -signal.SIGTERM
        assert reader.poll() is None and stranger.poll() is None
    finally:
        for p in (owner, writer, reader, stranger, marked):
            p.kill()
            p.wait()


def test_the_watchdog_ends_the_processes_of_a_driver_killed_with_sigkill(tmp_path):
    """A driver starts the watchdog and a Ray-like child that outlives it; ``kill -9`` of the driver."""
    driver = textwrap.dedent(
        f"""
        import os, subprocess, sys
        from raysfl.engine import reaper
        dog = reaper.start_watchdog("mk")
        logs = {str(tmp_path)!r} + f"/session_x_{{os.getpid()}}/logs"
        os.makedirs(logs)
        child = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}, logs + "/agent.log", "a"],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
        child.stdout.readline()
        print(dog.pid, child.pid, flush=True)
        import time; time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    dog, child = (int(x) for x in proc.stdout.readline().split())
    try:
        assert not _gone(child, 0.5)  # alive while the driver lives
        proc.kill()
        proc.wait()
        assert _gone(child, 10), "the driver's Ray-like child outlived it"
        assert _gone(dog, 10), "the watchdog did not exit"
    finally:  # clean up after a failure: only processes that are still ours
        for pid, word in ((child, "time.sleep"), (dog, "raysfl.engine.reaper")):
            with contextlib.suppress(OSError):
                if word in Path(f"/proc/{pid}/cmdline").read_text():
                    os.kill(pid, signal.SIGKILL)


def test_an_older_process_writing_under_a_session_of_the_drivers_pid_is_not_its(tmp_path):
    """A ``ray start`` cluster names its session after the PID of the short-lived ``ray start`` process; a
    later driver may get that PID. The cluster's processes started before the driver: they are left alone."""
    old_session = tmp_path / "session_old_0" / "logs"
    old_session.mkdir(parents=True)
    stale = _sleeper(old_session / "gcs.out", "a")  # started before the driver
    owner = _sleeper(tmp_path / "owner.log", "a")
    renamed = tmp_path / f"session_old_{owner.pid}"
    (tmp_path / "session_old_0").rename(renamed)  # its open file's path now names the driver's PID
    fresh = _sleeper(renamed / "logs" / "raylet.out", "a")  # started after the driver: the driver's own
    try:
        assert Path(os.readlink(f"/proc/{stale.pid}/fd/3")).parent == renamed / "logs"
        found = ray_pids(owner.pid, "m2")
        assert fresh.pid in found and stale.pid not in found
        assert kill_ray_processes(owner.pid, "m2", grace_s=1.0) == [fresh.pid]
        assert stale.poll() is None
    finally:
        for p in (stale, owner, fresh):
            p.kill()
            p.wait()


def test_the_watchdog_imports_raysfl_from_its_driver_not_the_working_directory(tmp_path):
    planted = tmp_path / "raysfl"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(tmp_path / 'PLANTED_RAN')!r}, 'w').close()\n")
    driver = "from raysfl.engine import reaper; print(reaper.start_watchdog('mk3').pid, flush=True)"
    # the driver runs from tmp_path: a relative PYTHONPATH entry of the test's own run (``PYTHONPATH=.``)
    # keeps naming the folder it named here, not the planted package
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p
        )
    proc = subprocess.run(
        [sys.executable, "-P", "-c", driver],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert _gone(int(proc.stdout.split()[0]), 10), "the watchdog did not run to its end"
    assert not (tmp_path / "PLANTED_RAN").exists()
