"""Shared fixtures: the dev datasets beside the checkout, small scenarios, one Ray instance per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def data_root() -> Path:
    """Where tests that need a real dataset look for it: ``$RAYSFL_DATA`` if set, else ``../shared/data``.

    Each such test skips, naming the path, when its dataset is not there.
    """
    env = os.environ.get("RAYSFL_DATA")
    return Path(env).resolve() if env else SHARED_DATA.resolve()


def shared_data_dir() -> Path | None:
    """The folder holding Fashion-MNIST: :func:`data_root`, else ``../shared/data``; None if neither does."""
    for cand in dict.fromkeys((data_root(), SHARED_DATA.resolve())):
        if (cand / "fashion-mnist").is_dir():
            return cand
    return None


@pytest.fixture(scope="session")
def fmnist_dir() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("real Fashion-MNIST not found (../shared/data or $RAYSFL_DATA); integration test skipped")
    return d


@pytest.fixture
def ray_session():
    """A local Ray instance shared by the tests (``ray.init`` takes seconds); restarted if a multi-node
    test replaced it with a cluster of its own."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local", num_cpus=4, include_dashboard=False, logging_level="WARNING", log_to_driver=False
        )
    return ray


@pytest.fixture(scope="session", autouse=True)
def _shutdown_ray_at_exit():
    """Before any test starts Ray: a missing ~/.ray/auth_token is made owner-only, as raysfl's own start makes
    it (the tests' plain ``ray.init`` would write it with the umask); after the last: Ray stops."""
    from raysfl.engine.ray_token import secure_token_file

    secure_token_file()
    yield
    import sys

    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()
