"""The client → pool rule of `engine.placement = "blocks"`: contiguous, as even as can be, no idle pool."""

import doctest

import pytest

import raysfl.engine.cluster
from raysfl.engine.cluster import pool_count, pool_of_client


@pytest.mark.parametrize("num_clients", [1, 5, 6, 10, 20, 100, 1000])
def test_every_pool_hosts_a_contiguous_block_and_blocks_differ_by_at_most_one(num_clients):
    for pools in range(1, min(num_clients, 12) + 1):
        of = pool_of_client(num_clients, pools)
        placed = [of(k) for k in range(num_clients)]
        assert placed == sorted(placed) and placed[0] == 0  # contiguous blocks in client order
        sizes = [placed.count(p) for p in range(pools)]
        assert min(sizes) >= 1, (num_clients, pools, sizes)  # K = 20 on 8 pools left pool 7 empty
        assert max(sizes) - min(sizes) <= 1


def test_the_readme_cluster_example_uses_all_eight_pools():
    assert sorted({pool_of_client(20, 8)(k) for k in range(20)}) == list(range(8))
    assert pool_count(20, 8, 0) == 8 and pool_count(20, 30, 0) == 20 and pool_count(20, 1, 6) == 4
    with pytest.raises(ValueError, match=r"pools: 21 must be in 1..20"):
        pool_of_client(20, 21)


def test_docstring_example_holds():
    assert doctest.testmod(raysfl.engine.cluster).failed == 0
