"""Least-loaded placement (engine.placement): the bookkeeping, without Ray."""

from dataclasses import dataclass

import pytest

from raysfl.engine.balance import LeastLoaded


@dataclass
class FakeCall:
    done: bool = False


def _balancer(pools: int = 2) -> LeastLoaded:
    return LeastLoaded(pools, lambda call: call.done)


def _submit(b: LeastLoaded, previous: int | None = None) -> tuple[int, FakeCall]:
    pool = b.pick(previous)
    call = FakeCall()
    b.submitted(pool, call)
    return pool, call


def test_ten_jobs_submitted_at_once_split_five_five():
    """FedAvg's round: 10 jobs at once, none finished yet (blocks of clients 0-9 / 10-19 often give 6/4)."""
    b = _balancer()
    pools = [_submit(b)[0] for _ in range(10)]
    assert pools == [0, 1] * 5
    assert b.calls == [5, 5]


def test_the_pool_with_fewer_calls_in_flight_wins_over_the_previous_one():
    b = _balancer()
    first = [_submit(b) for _ in range(4)]  # pools 0, 1, 0, 1
    first[1][1].done = first[3][1].done = True  # pool 1 has finished its two
    assert b.load(0) == 2 and b.load(1) == 0
    assert b.pick(previous=0) == 1
    assert b.moves == 1


def test_a_tie_keeps_the_previous_pool():
    b = _balancer(3)
    assert b.pick(previous=2) == 2  # all idle: the state is on pool 2's node already
    assert b.pick() == 0  # no previous pool: the lowest index
    assert b.moves == 0


def test_finished_calls_leave_the_load_in_submission_order():
    """An actor runs its calls in order: a finished call behind an unfinished one still counts until the
    head finishes (the load is a queue length, never below the true one for long)."""
    b = _balancer(1)
    calls = [_submit(b)[1] for _ in range(3)]
    calls[1].done = True
    assert b.load(0) == 3
    calls[0].done = True
    assert b.load(0) == 1


def test_reset_forgets_what_was_in_flight_but_not_the_counts():
    b = _balancer(3)
    _submit(b)
    _submit(b)
    b.reset()
    assert [b.load(p) for p in range(3)] == [0, 0, 0]
    assert b.calls == [1, 1, 0]


def test_at_least_one_pool():
    with pytest.raises(ValueError, match="n_pools"):
        LeastLoaded(0, lambda call: True)
