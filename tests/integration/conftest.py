"""Fixtures of the integration tests."""

from pathlib import Path

import pytest

from tests.integration.tiny_sweep import write_sweep


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    """The tiny sweep of :mod:`tests.integration.tiny_sweep`, written once per test module."""
    return write_sweep(tmp_path_factory.mktemp("sweep"))
