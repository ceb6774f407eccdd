"""Least-loaded placement (engine.placement): the bookkeeping, without Ray."""

from dataclasses import dataclass

import pytest

from raysfl.engine.balance import LeastLoaded


@dataclass
class FakeCall:
    done: bool = False


def _balancer(pools: int = 2) -> LeastLoaded:
    return LeastLoaded(pools, lambda call: call.done)


def _submit(b: LeastLoaded, client: int) -> tuple[int, int | None, FakeCall]:
    pool, source = b.place(client)
    call = FakeCall()
    b.submitted(client, pool, call)
    return pool, source, call


def test_ten_jobs_submitted_at_once_split_five_five():
    """FedAvg's round: 10 jobs at once, none finished yet; blocks of clients 0-4 / 5-9 would give 6/4."""
    b = _balancer()
    pools = [_submit(b, c)[0] for c in (0, 1, 2, 3, 4, 5, 7, 8, 9, 12)]
    assert pools.count(0) == 5 and pools.count(1) == 5
    assert b.moves == 0  # fresh clients are created where they run


def test_an_idle_client_moves_to_the_less_loaded_pool_and_says_from_where():
    b = _balancer()
    _, _, first = _submit(b, 0)  # client 0 -> pool 0
    first.done = True
    _submit(b, 1)  # pool 0 (tie, lowest index)
    pool, source, _ = _submit(b, 0)  # pool 0 has 1 call in flight, pool 1 none
    assert (pool, source) == (1, 0)
    assert b.home[0] == 1 and b.moves == 1


def test_a_client_with_a_call_in_flight_stays_with_its_pool():
    b = _balancer()
    _submit(b, 0)
    _submit(b, 1)
    _submit(b, 2)  # pools: 0 -> {0, 2}, 1 -> {1}
    pool, source, _ = _submit(b, 0)  # its forward is still running: keep the order on one actor
    assert (pool, source) == (0, None)


def test_a_tie_keeps_the_client_home():
    b = _balancer()
    _, _, c0 = _submit(b, 0)
    _, _, c1 = _submit(b, 1)
    c0.done = c1.done = True
    assert b.place(1) == (1, None)  # both pools idle: no move


def test_finished_calls_leave_the_load_in_order_and_transfers_count():
    b = _balancer()
    calls = [_submit(b, c)[2] for c in range(4)]  # 0, 2 -> pool 0; 1, 3 -> pool 1
    calls[0].done = True
    assert b.load(0) == 1 and b.load(1) == 2
    b.also_busy(0, FakeCall())
    assert b.load(0) == 2


def test_reset_after_a_restore():
    b = _balancer(3)
    _submit(b, 0)
    b.reset({0: 2, 5: 1})
    assert b.home == {0: 2, 5: 1}
    assert [b.load(p) for p in range(3)] == [0, 0, 0]
    assert b.place(5) == (1, None)  # nothing in flight anywhere: a tie, so it stays


def test_at_least_one_pool():
    with pytest.raises(ValueError, match="n_pools"):
        LeastLoaded(0, lambda call: True)
