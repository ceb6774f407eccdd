"""A client's minibatch order (GAS spec §10.11: ``DataLoader(shuffle=True, drop_last=False)`` cycled)."""

from __future__ import annotations

import numpy as np

from raysfl.algorithms.common.batching import BatchCursor, batch_size_at


def test_each_epoch_is_a_fresh_permutation_ending_in_the_remainder():
    """10 samples, B = 4: batches of 4, 4, 2 per epoch, each epoch every sample once, in a new order."""
    cursor, rng = BatchCursor(num_samples=10, batch_size=4), np.random.default_rng(0)
    epochs = [[cursor.next_positions(rng) for _ in range(3)] for _ in range(4)]
    for batches in epochs:
        assert [len(b) for b in batches] == [4, 4, 2]
        assert sorted(np.concatenate(batches).tolist()) == list(range(10))
    orders = [np.concatenate(b).tolist() for b in epochs]
    assert len({tuple(o) for o in orders}) == 4  # reshuffled at every epoch start
    assert (
        [batch_size_at(i, 10, 4) for i in range(12)]
        == [4, 4, 2] * 4
        == [len(b) for batches in epochs for b in batches]
    )
    assert cursor.step == 12


def test_the_order_depends_only_on_the_clients_stream():
    def drawn(seed: int) -> list[list[int]]:
        cursor, rng = BatchCursor(num_samples=9, batch_size=3), np.random.default_rng(seed)
        return [cursor.next_positions(rng).tolist() for _ in range(9)]

    assert drawn(7) == drawn(7)
    assert drawn(7) != drawn(8)
