"""Random layers draw from their owner's stream: which models need it, and what it costs the stream."""

import torch
from torch import nn

from raysfl.algorithms.common.own_rng import draws_randomness, seeded, seeded_if


def test_models_with_random_layers_are_recognised():
    assert draws_randomness(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1)))
    assert draws_randomness(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout2d(0.5)))
    assert draws_randomness(nn.RReLU())
    assert not draws_randomness(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Dropout(0.0)))
    assert not draws_randomness(nn.BatchNorm1d(3))


def test_seeded_masks_follow_the_owner_and_leave_the_process_stream_alone():
    def masks(process_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(process_seed)
        before = torch.get_rng_state()
        owner = torch.Generator().manual_seed(5)
        with seeded(owner):
            mask = nn.functional.dropout(torch.ones(64), 0.5)
        assert torch.equal(torch.get_rng_state(), before), "the process's global stream moved"
        return mask, owner.get_state()

    (m1, s1), (m2, s2) = masks(1), masks(2)
    assert torch.equal(m1, m2)  # same owner stream, different processes: same mask
    assert torch.equal(s1, s2)
    assert 0 < int((m1 == 0).sum()) < 64


def test_seeded_if_draws_nothing_for_models_without_random_layers():
    owner = torch.Generator().manual_seed(3)
    state = owner.get_state()
    with seeded_if(False, owner):
        pass
    assert torch.equal(owner.get_state(), state)
    with seeded_if(True, owner):
        pass
    assert not torch.equal(owner.get_state(), state)  # one integer drawn for the block's seed


def test_a_replayed_forward_draws_the_masks_of_the_first_and_leaves_the_stream_alone():
    """The recomputation a split client runs for its backward (the API audit: a second seeded_if block gave
    other masks, so the gradient was not that of the activations the client sent)."""
    from raysfl.api import replaying_rng

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5)).train()
    x, gen = torch.ones(4, 16), torch.Generator().manual_seed(0)
    with seeded_if(True, gen):
        saved = torch.get_rng_state()
        sent = model(x)
    with seeded_if(True, gen):
        assert not torch.equal(model(x), sent)  # what the audit's method did: other masks
    before = torch.get_rng_state()
    with replaying_rng(saved):
        assert torch.equal(model(x), sent)
    assert torch.equal(torch.get_rng_state(), before)  # the process's stream is where it was
