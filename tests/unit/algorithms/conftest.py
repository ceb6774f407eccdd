"""Fixtures shared by the algorithm tests."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """The in-process server maths on one thread: faster on a shared 2-core machine, same code paths."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
