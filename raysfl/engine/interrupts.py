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
