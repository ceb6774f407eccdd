"""Least-loaded placement: which client pool runs a roaming client's next call (``engine.placement``).

With ``placement = "blocks"`` client c always runs in pool ``c · pools // K`` and its state lives
there. When only some clients are active at a time (FedAvg samples C of K each round) the blocks get
unequal shares: 10 jobs of 20 clients on 2 pools split 6/4 or worse about two times in three, and a
synchronous round lasts as long as the busier pool.

With ``placement = "least-loaded"`` (the default) the clients of a logic whose every call is a whole job
(``clients_roam = True`` on the client logic: the FL family's ``FLClient``) keep no state in any pool: each
call takes the client's state as an argument and returns it beside its result, so the state waits in
Ray's object store between jobs, and the call goes to the pool with the fewest calls in flight. Nothing is
moved by an extra call: the next job's call names the previous job's returned state, and Ray hands it to
whichever pool runs that job. (Moving a resident state with a ``take_state`` call on its old pool, tried
first, waited behind that pool's whole queue; benchmarks/RESULTS.md.)

Results do not change: a client's computation depends only on its own state and the call's arguments
(its random draws come from its own streams, ``algorithms.common.own_rng``), not on the process that runs
it. Which pool a call lands on depends on how fast the pools finish theirs, so the placement is not
reproducible; the numbers are.

:class:`LeastLoaded` is the bookkeeping without Ray (``is_done`` tells whether a call has finished), so
the rule is unit-tested on its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

PLACEMENTS = ("blocks", "least-loaded")


class LeastLoaded:
    """Chooses each roaming call's pool from the calls in flight per pool.

    Args:
        n_pools: how many pools there are.
        is_done: whether the call behind a handle (a Ray ``ObjectRef``) has finished; must not block.
    """

    def __init__(self, n_pools: int, is_done: Callable[[Any], bool]) -> None:
        if n_pools < 1:
            raise ValueError(f"n_pools must be at least 1, got {n_pools}")
        self.n_pools = n_pools
        self.is_done = is_done
        self._inflight: list[deque[Any]] = [deque() for _ in range(n_pools)]
        self.calls = [0] * n_pools  # calls submitted to each pool (reported in summary.json)
        self.moves = 0  # picks of another pool than the client's previous one

    def load(self, pool: int) -> int:
        """Calls submitted to ``pool`` that have not finished (an actor runs its calls in order)."""
        queue = self._inflight[pool]
        while queue and self.is_done(queue[0]):
            queue.popleft()
        return len(queue)

    def pick(self, previous: int | None = None) -> int:
        """The pool with the fewest calls in flight.

        On a tie ``previous`` (the client's last pool: its state is on that node already), then the lowest
        index.
        """
        loads = [self.load(p) for p in range(self.n_pools)]
        best = min(range(self.n_pools), key=lambda p: (loads[p], p != previous, p))
        if previous is not None and best != previous:
            self.moves += 1
        return best

    def submitted(self, pool: int, call: Any) -> None:
        """Record a call submitted to ``pool``."""
        self._inflight[pool].append(call)
        self.calls[pool] += 1

    def reset(self) -> None:
        """After a restore: nothing is in flight."""
        for queue in self._inflight:
            queue.clear()
