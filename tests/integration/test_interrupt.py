"""^C and ``kill -9`` of ``raysfl run`` on an embedded local Ray: exit 130, no crash, no process left.

Before the fix ^C during Ray's start-up could crash the interpreter (exit -11) or print a traceback (a
half-imported torch), and Ray's dashboard and runtime-env agents outlived the driver by about 60 s. A
process counts as the run's when it carries this test's tag in its environment or writes into the Ray
session directory named after the driver (the agents retitle themselves, which blanks their environment).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from raysfl.engine.reaper import ray_pids

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux only)"),
]

SCENARIO = """\
name = "interrupt"
[data]
dataset = "synthetic"
partition = "iid"
synthetic_train = 200
synthetic_test = 100
[model]
name = "lenet5"
[federation]
num_clients = 4
active_clients = 2
[train]
global_iterations = 100000
local_iterations = 1
batch_size = 16
[metrics]
progress = false
"""


def _processes(driver: int, tag: str) -> dict[int, str]:
    """pid -> name (``comm``) of every process of the run (see the module docstring), the driver excluded."""
    found = set(ray_pids(driver, marker="-"))
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != driver:
            with contextlib.suppress(OSError):
                if tag.encode() in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                    found.add(int(name))
    names = {}
    for pid in found:
        with contextlib.suppress(OSError):
            names[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
    return names


def _start(tmp_path: Path, batch_job: bool = False) -> tuple[subprocess.Popen, str]:
    """``raysfl run`` on an embedded Ray; ``batch_job``: started as a non-interactive shell starts a job in
    the background (a batch script's `cmd &`), with Ctrl-C ignored."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    tag = f"RAYSFL_TEST_TAG={uuid.uuid4().hex}"
    env = {**os.environ, tag.split("=")[0]: tag.split("=")[1]}
    cmd = [sys.executable, "-m", "raysfl.cli", "run", str(scenario), "--out", str(tmp_path / "run")]
    # Ctrl-C as at a terminal, even when the tests themselves run in the background (which ignores it)
    ctrl_c = signal.SIG_IGN if batch_job else signal.SIG_DFL
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, ctrl_c),
    )
    return proc, tag


def _wait_for(proc: subprocess.Popen, tag: str, prefix: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(name.startswith(prefix) for name in _processes(proc.pid, tag).values()):
            return
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"no {prefix} process appeared in {timeout_s} s")


def _left_after(proc: subprocess.Popen, tag: str, timeout_s: float) -> dict[int, str]:
    deadline = time.monotonic() + timeout_s
    left = _processes(proc.pid, tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _processes(proc.pid, tag)
    return left


def test_ctrl_c_while_ray_starts_exits_130_and_leaves_nothing(tmp_path):
    proc, tag = _start(tmp_path)
    _wait_for(proc, tag, "raylet")  # the raylet is up; the agents and workers are still starting
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "raysfl: interrupted" in out
    assert _left_after(proc, tag, timeout_s=10) == {}


def test_kill_9_of_the_driver_leaves_no_ray_process(tmp_path):
    proc, tag = _start(tmp_path)
    _wait_for(proc, tag, "ray::RuntimeEnv")  # the agents are up
    proc.kill()
    proc.communicate(timeout=30)
    assert _left_after(proc, tag, timeout_s=10) == {}


def test_sigterm_ends_a_batch_jobs_run_as_ctrl_c_does(tmp_path):
    """A scheduler's or a container's stop is SIGTERM, sent to a job whose Ctrl-C is ignored. Ray's driver
    handler exited with status 15 and a C++ stack dump and wrote no summary; the run now ends as
    interrupted, keeps its outputs and leaves no Ray process."""
    proc, tag = _start(tmp_path, batch_job=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "run" / "metrics.parquet").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "SIGTERM received" not in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["stop_reason"] == "interrupted"
    assert _left_after(proc, tag, timeout_s=10) == {}
