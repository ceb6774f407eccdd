"""The data cache is used only where no other account can plant entries, and never fails a load."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from raysfl.data.cache import cache_dir, cache_path, cached_arrays

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "images.bin"
    source.write_bytes(b"the source the arrays are decoded from")
    return source


def _builder(calls: list[int]):  # noqa: ANN202
    def build() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"x": np.arange(6, dtype=np.uint8).reshape(2, 3)}

    return build


def _plant(source: Path) -> Path:
    """Write an entry with wrong arrays where ``source``'s entry belongs."""
    planted = cache_path(source, "tag")
    with open(planted, "wb") as fh:
        np.savez(fh, x=np.full((2, 3), 255, dtype=np.uint8))
    return planted


def test_the_cache_folder_is_made_private_and_its_entry_is_reused(tmp_path: Path) -> None:
    source, calls = _source(tmp_path), []
    umask = os.umask(0o022)  # the usual one: the folder's 0700 must come from raysfl
    try:
        first = cached_arrays(source, "tag", _builder(calls))
    finally:
        os.umask(umask)
    assert stat.S_IMODE(cache_dir().stat().st_mode) & 0o077 == 0
    second = cached_arrays(source, "tag", _builder(calls))
    assert calls == [1]  # the second load read the entry
    np.testing.assert_array_equal(first["x"], second["x"])


def test_a_folder_others_can_write_to_is_not_used(tmp_path: Path) -> None:
    source, calls = _source(tmp_path), []
    cache_dir().mkdir()
    cache_dir().chmod(0o777)
    planted = _plant(source)
    with pytest.warns(UserWarning, match=r"not using the data cache .*group or others can write.*chmod go-w"):
        arrays = cached_arrays(source, "tag", _builder(calls))
    assert calls == [1] and arrays["x"].max() == 5  # built, not the planted 255s
    assert list(cache_dir().iterdir()) == [planted]  # and nothing written there


def test_another_users_folder_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, calls = _source(tmp_path), []
    cache_dir().mkdir(mode=0o700)
    planted = _plant(source)
    owner = cache_dir().stat().st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)  # this process runs as another user
    with pytest.warns(UserWarning, match=rf"not using the data cache .*belongs to user id {owner}, not"):
        arrays = cached_arrays(source, "tag", _builder(calls))
    assert calls == [1] and arrays["x"].max() == 5
    assert list(cache_dir().iterdir()) == [planted]


def test_a_cache_folder_that_cannot_be_made_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("RAYSFL_CACHE", str(tmp_path / "a-file" / "cache"))
    calls: list[int] = []
    with pytest.warns(UserWarning, match="could not use the data cache"):
        arrays = cached_arrays(_source(tmp_path), "tag", _builder(calls))
    assert calls == [1] and arrays["x"].shape == (2, 3)


def test_an_entry_planted_while_the_folder_was_open_is_replaced(tmp_path: Path) -> None:
    """`chmod go-w` on the folder, as the warning advises, leaves what others wrote there before."""
    source, calls = _source(tmp_path), []
    cache_dir().mkdir(mode=0o700)
    planted = _plant(source)
    planted.chmod(0o666)
    with pytest.warns(UserWarning, match=r"replacing the data cache entry .*group or others can write"):
        arrays = cached_arrays(source, "tag", _builder(calls))
    assert calls == [1] and arrays["x"].max() == 5
    assert stat.S_IMODE(planted.stat().st_mode) & 0o077 == 0  # the built arrays replaced it
    assert cached_arrays(source, "tag", _builder(calls))["x"].max() == 5 and calls == [1]
