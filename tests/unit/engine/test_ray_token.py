"""Ray's token file: created owner-only for an embedded Ray when missing, named when other users can read it
(also when joining a cluster)."""

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from raysfl.engine.ray_token import joined_token_warning, secure_token_file, token_file

pytestmark = pytest.mark.skipif(sys.platform.startswith("win"), reason="file modes are POSIX")


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_home():
    """A home folder every user may enter (0755) in a temporary folder every user may enter, as /tmp is."""
    base = Path(tempfile.gettempdir()).resolve()
    if not all(stat.S_IMODE(folder.stat().st_mode) & stat.S_IXOTH for folder in (base, *base.parents)):
        pytest.skip(f"{base} is not open to other users, so no file under it is")
    home = Path(tempfile.mkdtemp(prefix="raysfl-home-"))
    home.chmod(0o755)
    yield home
    shutil.rmtree(home)


@pytest.fixture
def umask_022():
    """The common umask, under which Ray's own token file would be 0644."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_the_token_file_follows_rays_lookup_order(tmp_path):
    home = {"HOME": str(tmp_path)}
    assert token_file(home) == (tmp_path / ".ray" / "auth_token", True)
    assert token_file({**home, "RAY_AUTH_MODE": "token"}) == (tmp_path / ".ray" / "auth_token", True)
    assert token_file({**home, "RAY_AUTH_MODE": "TOKEN"}) == (tmp_path / ".ray" / "auth_token", True)
    assert token_file({**home, "RAY_AUTH_TOKEN_PATH": "/etc/tok"}) == (Path("/etc/tok"), False)
    # RAY_AUTH_TOKEN comes before RAY_AUTH_TOKEN_PATH; no file is read then
    assert token_file({**home, "RAY_AUTH_TOKEN": "abc", "RAY_AUTH_TOKEN_PATH": "/etc/tok"}) == (None, False)
    empty_token = {**home, "RAY_AUTH_TOKEN": "", "RAY_AUTH_TOKEN_PATH": "/etc/tok"}
    assert token_file(empty_token) == (Path("/etc/tok"), False)
    for off in ("disabled", "k8s", "", " token"):  # Ray lower-cases the mode, and strips nothing
        assert token_file({**home, "RAY_AUTH_MODE": off}) == (None, False)
    assert token_file({}) == (None, False)  # no home folder: Ray's fallback is relative to its cwd


def test_a_missing_default_token_file_is_created_owner_only(tmp_path, umask_022):
    home = tmp_path / "home"
    home.mkdir()
    assert secure_token_file({"HOME": str(home)}) is None
    path = home / ".ray" / "auth_token"
    token = path.read_text()
    assert len(token) == 64 and set(token) <= set("0123456789abcdef")  # 32 random bytes in hex, Ray's format
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    # a second start keeps it: Ray and every earlier run use the same token
    assert secure_token_file({"HOME": str(home)}) is None
    assert path.read_text() == token
    other = tmp_path / "other"
    other.mkdir()
    secure_token_file({"HOME": str(other)})
    assert (other / ".ray" / "auth_token").read_text() != token  # a fresh one each time one is made


def test_an_existing_ray_folder_keeps_its_mode(tmp_path, umask_022):
    (tmp_path / ".ray").mkdir(mode=0o755)
    assert secure_token_file({"HOME": str(tmp_path)}) is None
    assert _mode(tmp_path / ".ray" / "auth_token") == 0o600 and _mode(tmp_path / ".ray") == 0o755


def _token(home: Path, mode: int, folder_mode: int = 0o755) -> Path:
    path = home / ".ray" / "auth_token"
    path.parent.mkdir()
    path.parent.chmod(folder_mode)
    path.write_text("f" * 64)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o666])
def test_a_token_file_other_users_can_read_or_change_is_named_and_left_alone(open_home, mode):
    path = _token(open_home, mode)
    warning = secure_token_file({"HOME": str(open_home)})
    assert warning == (
        f"{path} (Ray's authentication token) can be read or changed by other users of this machine "
        f"(mode {mode:04o}); whoever reads it can run code in every Ray that uses it, the one raysfl starts "
        f"now included. `chmod 600 {path}` makes it yours alone."
    )
    assert path.read_text() == "f" * 64 and _mode(path) == mode


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700])
def test_an_owner_only_token_file_says_nothing(open_home, mode):
    path = _token(open_home, mode)
    assert secure_token_file({"HOME": str(open_home)}) is None
    assert path.read_text() == "f" * 64


@pytest.mark.parametrize(
    ("home_mode", "ray_folder_mode", "file_mode", "named"),
    [
        (0o700, 0o755, 0o644, False),  # a private home folder keeps a 0644 token to its owner
        (0o755, 0o700, 0o644, False),  # so does a private ~/.ray
        (0o750, 0o755, 0o644, True),  # the group may enter, and the group may read
        (0o750, 0o755, 0o604, False),  # others may read it but cannot reach it
        (0o711, 0o711, 0o604, True),  # search without listing is enough to open a known name
    ],
)
def test_a_shared_mode_counts_only_where_the_folders_above_let_others_through(
    open_home, home_mode, ray_folder_mode, file_mode, named
):
    _token(open_home, file_mode, ray_folder_mode)
    open_home.chmod(home_mode)
    assert (secure_token_file({"HOME": str(open_home)}) is not None) is named
    open_home.chmod(0o755)


def test_a_home_that_cannot_be_written_is_left_to_ray(tmp_path):
    home = tmp_path / "home"
    home.write_text("a file, not a folder")  # as unwritable as it gets, even for root
    assert secure_token_file({"HOME": str(home)}) is None


def test_the_file_in_ray_auth_token_path_is_never_created(tmp_path):
    named = tmp_path / "tokens" / "ray"
    env = {"HOME": str(tmp_path), "RAY_AUTH_TOKEN_PATH": str(named)}
    assert secure_token_file(env) is None  # missing: Ray reports that itself
    assert not named.exists() and not (tmp_path / ".ray").exists()


def test_a_shared_file_in_ray_auth_token_path_is_named(open_home):
    named = open_home / "ray-token"
    named.write_text("f" * 64)
    named.chmod(0o640)
    warning = secure_token_file({"HOME": str(open_home), "RAY_AUTH_TOKEN_PATH": str(named)})
    assert warning is not None and warning.startswith(f"{named} (Ray's authentication token)")
    assert not (open_home / ".ray").exists()


@pytest.mark.parametrize("env", [{"RAY_AUTH_MODE": "disabled"}, {"RAY_AUTH_TOKEN": "a" * 64}])
def test_nothing_is_written_when_ray_reads_no_token_file(tmp_path, env):
    assert secure_token_file({"HOME": str(tmp_path), **env}) is None
    assert not (tmp_path / ".ray").exists()


@pytest.mark.parametrize(
    ("address", "auth_mode", "named"),
    [
        ("auto", None, True),  # a found cluster: Ray turns token mode on when a token file exists
        ("auto", "token", True),
        ("10.0.0.1:6379", "token", True),
        ("10.0.0.1:6379", None, False),  # an explicit address with the mode unset joins without a token
        ("auto", "disabled", False),
    ],
)
def test_joining_a_cluster_names_a_shared_token_file_only_where_ray_reads_it(
    open_home, address, auth_mode, named
):
    path = _token(open_home, 0o644)
    env = {"HOME": str(open_home)} | ({} if auth_mode is None else {"RAY_AUTH_MODE": auth_mode})
    warning = joined_token_warning(address, env)
    if named:
        assert warning == (
            f"{path} (Ray's authentication token) can be read or changed by other users of this machine "
            "(mode 0644); whoever reads it can run code in every Ray that uses it, the cluster raysfl joins "
            f"now included. `chmod 600 {path}` makes it yours alone."
        )
    else:
        assert warning is None
    assert _mode(path) == 0o644  # the user's own file, left as it is
    path.chmod(0o600)
    assert joined_token_warning(address, env) is None


def test_joining_a_cluster_never_creates_a_token_file(tmp_path, umask_022):
    for env in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "RAY_AUTH_MODE": "token"}):
        assert joined_token_warning("auto", env) is None
    assert not (tmp_path / ".ray").exists()  # the token must be the cluster's: it is not raysfl's to make
