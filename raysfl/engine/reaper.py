"""Leave no Ray processes behind: an embedded Ray dies with the driver that started it, however it ends.

Ray's own fate-sharing covers the GCS and the raylet (the kernel kills them when the driver dies,
``PR_SET_PDEATHSIG``), not the raylet's children: the dashboard agent and the runtime-env agent (about
200 MB together) see the raylet die at once but take about 60 s to exit (they publish "raylet died" to a
GCS that is gone, with a 60 s timeout, and aiohttp's shutdown waits up to 60 s), and idle workers may
linger too. The processes of an embedded Ray are found (:func:`ray_pids`) by either of two signs:

* a marker in their environment (:data:`MARKER_VAR`, set only while ``ray.init`` starts them; Ray's
  processes pass their environment on), which ``/proc/PID/environ`` shows until a process retitles itself
  (the agents do, and that blanks it);
* a file open for writing under the Ray session's directory, which Ray names ``session_<time>_<PID of the
  driver>``: every Ray process writes its logs there from its first moments (a ``tail -f`` reads them:
  it is not one of them).

Either way a process must have started after the driver did (:func:`process_start`): a PID is reused,
and a cluster that ``ray start`` began under an earlier process with the driver's PID names its session
the same way; its processes are older than the driver and are left alone.

:func:`kill_ray_processes` ends them (SIGTERM, SIGKILL after a grace period). The driver calls it after
``ray.shutdown()`` (:func:`raysfl.engine.cluster.shutdown_ray`), ^C included; and a watchdog
(``python -m raysfl.engine.reaper PID MARKER START``, :func:`start_watchdog`), in a session of its own so the
terminal's ^C does not reach it, reads a pipe from the driver: when the driver exits in any way,
``kill -9`` included, the pipe closes and the watchdog calls it.

Linux only (it reads ``/proc``); elsewhere both do nothing and Ray's own fate-sharing is what holds. The
module imports only the standard library, so the watchdog starts in milliseconds and holds a few MB.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

MARKER_VAR = "RAYSFL_RAY_OWNER"


def _writes_under(pid: str, session: re.Pattern[str]) -> bool:
    """Whether process ``pid`` has a file open for writing whose path matches ``session``."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if not session.search(os.readlink(f"/proc/{pid}/fd/{fd}")):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                flags = next(int(line.split()[1], 8) for line in fh if line.startswith("flags:"))
        except (OSError, StopIteration, ValueError):
            continue
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
            return True
    return False


def process_start(pid: int | str) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return int(fields[19])  # field 22 of the file; the list starts at field 3
    except (OSError, IndexError, ValueError):
        return None


def ray_pids(owner: int, marker: str, since: int | None = None) -> list[int]:
    """The live processes of the Ray that process ``owner`` started (see the module docstring).

    ``since``: the owner's :func:`process_start` (looked up while it lives when not given); processes that
    started before it are not its. ``owner`` itself and this process are never listed; zombies have no
    environment or files, nor are.
    """
    since = process_start(owner) if since is None else since
    entry = f"{MARKER_VAR}={marker}".encode()
    session = re.compile(rf"/session_[^/]*_{owner}/")
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    pids = []
    for name in names:
        if not name.isdigit() or int(name) in (os.getpid(), owner):
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:  # gone, or another user's
            continue
        if not (entry in env.split(b"\0") or _writes_under(name, session)):
            continue
        started = process_start(name)
        if since is None or (started is not None and started >= since):
            pids.append(int(name))
    return pids


def _send(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):  # already gone
            os.kill(pid, sig)


def kill_ray_processes(owner: int, marker: str, grace_s: float = 2.0, since: int | None = None) -> list[int]:
    """SIGTERM :func:`ray_pids`, SIGKILL those still there after ``grace_s``; returns the pids signalled."""
    since = process_start(owner) if since is None else since
    found = ray_pids(owner, marker, since)
    _send(found, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = found
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = ray_pids(owner, marker, since)
    _send(left, signal.SIGKILL)
    return sorted(set(found) | set(left))


def start_watchdog(marker: str) -> subprocess.Popen | None:
    """Start the watchdog that ends this process's embedded Ray once this process has exited (Linux only).

    Keep the returned handle: its pipe stays open while this process lives; closing it (or exiting)
    sets the watchdog off.
    """
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc"):
        return None
    env = {k: v for k, v in os.environ.items() if k != MARKER_VAR}
    # -P: the working directory's modules are not imported (a folder named raysfl there is not this
    # package); the folder holding the raysfl this process runs is named instead, installed or not
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    started = process_start(os.getpid())
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "raysfl.engine.reaper", str(os.getpid()), marker, str(started or 0)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The watchdog: wait for end of input (the driver has exited), then end the driver's Ray processes."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or not args[0].isdigit() or not args[2].isdigit():
        print("usage: python -m raysfl.engine.reaper DRIVER_PID MARKER DRIVER_START_TICKS", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):  # the driver never writes; b"" means it has gone
        pass
    kill_ray_processes(int(args[0]), args[1], since=int(args[2]))  # the driver is gone: its start is given
    return 0


if __name__ == "__main__":
    sys.exit(main())
