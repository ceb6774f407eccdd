"""Ctrl-C that always ends a run: a SIGINT remembered, raised again at the next event if it was swallowed.

Python turns SIGINT into ``KeyboardInterrupt`` wherever the main thread is. Raised inside a finaliser
(``__del__``, a weakref callback) it is printed as "Exception ignored" and lost, and the run goes on as if
nothing happened. While a run is in the coordinator's loop, :func:`remembered_interrupts` installs a handler
that does what Python's does and also remembers the signal; the loop asks :meth:`InterruptFlag.check` after
every event, which raises ``KeyboardInterrupt`` again when one came and the run is still going.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class InterruptFlag:
    """Whether a SIGINT came while the guard was on."""

    def __init__(self) -> None:
        self.hit = False

    def handle(self, signum: int, frame: Any) -> None:
        """The SIGINT handler: remember, then raise as Python's own handler does."""
        self.hit = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` when a SIGINT came: the run is still going, so it was swallowed."""
        if self.hit:
            raise KeyboardInterrupt


@contextmanager
def remembered_interrupts() -> Iterator[InterruptFlag]:
    """Remember SIGINTs while the block runs.

    Only in the main thread and in place of Python's default handler: a caller's own handler, or a worker
    thread (a sweep trial's), is left as it is, and the flag stays unset.
    """
    flag = InterruptFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        yield flag
        return
    signal.signal(signal.SIGINT, flag.handle)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def stop_on_sigterm() -> None:
    """Make SIGTERM (a batch scheduler's or a container's stop) end a run or a sweep as Ctrl-C does.

    The handler calls whatever handles Ctrl-C at that moment (Python's, the coordinator's
    :func:`remembered_interrupts`, Ray Tune's), so the work stops and what was written is kept: the summary
    says interrupted, a sweep names its unfinished trials, and the exit status is 130. Where Ctrl-C is
    ignored (a process started in the background by a non-interactive shell, as batch jobs are), it raises
    ``KeyboardInterrupt`` itself. Without it SIGTERM killed a local run at once, and Ray's driver handler
    (installed by ``ray.init``, so this is called again after it) exited with status 15 and a stack dump,
    writing no summary. Main thread only.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _as_ctrl_c)


def _as_ctrl_c(signum: int, frame: Any) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:  # SIG_IGN (inherited by a background job) or SIG_DFL
        raise KeyboardInterrupt
