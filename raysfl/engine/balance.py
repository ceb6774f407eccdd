"""Least-loaded placement: which client pool runs a client's next call (``engine.placement``).

With ``placement = "blocks"`` client c always runs in pool ``c // ceil(K / pools)``. When only some clients
are active at a time (FedAvg samples C of K each round) the blocks get unequal shares: 10 jobs on 2 pools
split 6/4 as often as 5/5, and a synchronous round lasts as long as the busier pool. With
``placement = "least-loaded"`` a client with no call in flight goes to the pool with the fewest calls in
flight (its own pool on a tie), and its state, plain data, moves there first (``take_state`` on the old
pool, whose result Ray hands to ``put_state`` on the new one; the coordinator never fetches it).

Results do not change: a client's computation depends only on its own state and the call's arguments
(its random draws come from its own streams, ``algorithms.common.own_rng``), not on the process that runs
it. A client logic that keeps client state of its own (GAS's ``optimizer_state = "shared"``, the
reference code's one momentum buffer carried from client to client; MiniBatch-SFL's and S2FL's cut of
each client) sets ``pins_clients`` and keeps its blocks. Which pool a call
lands on depends on how fast the pools finish theirs, so the placement is not reproducible; the numbers
are.

:class:`LeastLoaded` is the bookkeeping without Ray (``is_done`` tells whether a call has finished), so
the rule is unit-tested on its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

PLACEMENTS = ("blocks", "least-loaded")


class LeastLoaded:
    """Chooses each client call's pool; tracks the calls in flight per pool and each client's home.

    Args:
        n_pools: how many pools there are.
        is_done: whether the call behind a handle (a Ray ``ObjectRef``) has finished; must not block.
    """

    def __init__(self, n_pools: int, is_done: Callable[[Any], bool]) -> None:
        if n_pools < 1:
            raise ValueError(f"n_pools must be at least 1, got {n_pools}")
        self.n_pools = n_pools
        self.is_done = is_done
        self.home: dict[int, int] = {}  # client -> the pool holding its state
        self._last: dict[int, Any] = {}  # client -> its latest call
        self._inflight: list[deque[Any]] = [deque() for _ in range(n_pools)]
        self.moves = 0

    def load(self, pool: int) -> int:
        """Calls submitted to ``pool`` that have not finished (an actor runs its calls in order)."""
        queue = self._inflight[pool]
        while queue and self.is_done(queue[0]):
            queue.popleft()
        return len(queue)

    def place(self, client: int) -> tuple[int, int | None]:
        """``(pool, moved_from)`` for the client's next call.

        ``moved_from`` is the pool to take the client's state from, or ``None`` when the client stays (or
        has no state yet: a fresh client is created where it runs).
        """
        home = self.home.get(client)
        last = self._last.get(client)
        if home is not None and last is not None and not self.is_done(last):
            return home, None  # a call of this client is in flight: keep its order on one actor
        loads = [self.load(p) for p in range(self.n_pools)]
        best = min(range(self.n_pools), key=lambda p: (loads[p], p != home, p))
        self.home[client] = best
        if home is None or best == home:
            return best, None
        self.moves += 1
        return best, home

    def submitted(self, client: int, pool: int, call: Any) -> None:
        """Record a call of ``client`` submitted to ``pool``."""
        self._last[client] = call
        self._inflight[pool].append(call)

    def also_busy(self, pool: int, call: Any) -> None:
        """Record a call on ``pool`` that belongs to no client's order (a state transfer)."""
        self._inflight[pool].append(call)

    def reset(self, homes: Mapping[int, int]) -> None:
        """After a restore: these clients' states are in these pools; nothing is in flight."""
        self.home = {int(c): int(p) for c, p in homes.items()}
        self._last.clear()
        for queue in self._inflight:
            queue.clear()
