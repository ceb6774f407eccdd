"""The examples' tests share the suite's fixtures (one local Ray per session)."""

from tests.conftest import _ray_only_in_its_group, fmnist_dir, ray_session  # noqa: F401 - fixtures, found by name
