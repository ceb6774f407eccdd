"""Shared fixtures: the dev datasets beside the checkout, small scenarios, one Ray instance per session."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
INTEGRATION = ROOT / "tests" / "integration"
# Ray's actors and an xdist worker share the cores: OpenMP threads that spin while they wait made a Ray test
# ten times slower beside one busy process (14 s alone, 145 s; 32 s with passive waiting). Same numbers.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

RAY_GROUP_PREFIX = "ray:"
"""The pytest-xdist groups of the tests that use Ray, one per test file (:func:`ray_group`)."""


@contextlib.contextmanager
def on_sys_path(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` for the block: scripts (benchmarks/) import each other that way."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))


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


def uses_ray(item: pytest.Item) -> bool:
    """Whether a test starts or uses Ray: it asks for ``ray_session``, is marked ``ray``, or is an integration
    test (those start their own Ray, clusters and command-line subprocesses)."""
    return (
        "ray_session" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("ray") is not None
        or item.path.is_relative_to(INTEGRATION)
    )


def ray_group(item: pytest.Item) -> str:
    """The xdist group of a test that uses Ray: its file's, so that a file's tests run in order in one
    worker, on that worker's one Ray (``ray_session``), as they do in one process."""
    return RAY_GROUP_PREFIX + item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests for ``pytest -n N --dist loadgroup``: the Ray tests of a file in one group, run in
    order on one worker; the other tests go one by one. xdist hands a group, or a test, to whichever worker
    is free, so each worker may start a Ray of its own (``address="local"``, never another's). One group for
    all Ray tests made them the suite's critical path: they ran alone for the last ~3.5 of 13:15 minutes
    (12:24 with a group per file). Without xdist the mark does nothing."""
    for item in items:
        if uses_ray(item):
            item.add_marker(pytest.mark.xdist_group(ray_group(item)))


def pytest_configure(config: pytest.Config) -> None:
    """Refuse ``--dist loadgroup`` under pytest 9: pytest-xdist 3.8 puts a test's group into its node id,
    which pytest 9 no longer reads, so the Ray tests would spread over the workers (hence ``pytest<9`` in the
    test extras). An xdist worker computes with its share of the cores: two workers with torch's default of
    one thread per core would each spin threads on the other's cores (in-process runs set their roles')."""
    if config.getoption("dist", "no") == "loadgroup" and int(pytest.__version__.split(".")[0]) >= 9:
        raise pytest.UsageError(
            f"--dist loadgroup does not group tests with pytest {pytest.__version__} (pytest-xdist 3.8 sets "
            'node ids that pytest 9 ignores): pip install "pytest<9", or run `make test TEST_WORKERS=0`'
        )
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _ray_only_in_its_group(request: pytest.FixtureRequest):
    """Under xdist, a test outside the Ray groups must not start Ray in its worker: the tests after it there
    would share a Ray they did not ask for, and its file's other tests could run on another worker, each
    starting one. Such a test asks for ``ray_session`` or is marked ``ray``."""
    ray = sys.modules.get("ray")
    was_running = ray is not None and ray.is_initialized()
    yield
    if was_running or not os.environ.get("PYTEST_XDIST_WORKER") or uses_ray(request.node):
        return
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()  # so that the next tests are not blamed for it
        pytest.fail(
            f"{request.node.nodeid} started Ray outside the test groups that hold it: "
            "ask for the ray_session fixture or mark the test with pytest.mark.ray"
        )
