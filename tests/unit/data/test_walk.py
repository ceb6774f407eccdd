"""One walk of a folder for the image reader and the cache: sorted, links followed, cycles cut."""

from pathlib import Path

import pytest

from raysfl.data.errors import DataCorruptError
from raysfl.data.walk import MAX_FOLDER_VISITS, files_below


def test_links_are_followed_every_time_and_only_a_link_up_the_tree_is_cut(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "x.jpg").write_bytes(b"x")
    root = tmp_path / "root"
    (root / "b").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "b" / "2.jpg").write_bytes(b"2")
    (root / "b" / "1.jpg").write_bytes(b"1")
    (root / "a" / "l").symlink_to(tmp_path / "shared")
    (root / "b" / "l").symlink_to(tmp_path / "shared")  # the same folder under a second name: read twice
    (root / "b" / "up").symlink_to(root)  # a cycle: cut
    (root / "b" / "gone.jpg").symlink_to(tmp_path / "nothing")  # dangling: listed, for the reader to name
    names = [p.relative_to(root).as_posix() for p in files_below(root)]
    assert names == ["a/l/x.jpg", "b/1.jpg", "b/2.jpg", "b/gone.jpg", "b/l/x.jpg"]
    # a walk started lower down, told what lies above it, cuts the same cycle
    assert [p.name for p in files_below(root / "b", (root,))] == ["1.jpg", "2.jpg", "gone.jpg", "x.jpg"]


def test_links_that_fan_out_level_after_level_stop_the_walk_with_a_clear_error(tmp_path: Path) -> None:
    """Each level links twice to the next: the last folder is reached through 2**depth paths (12 levels:
    4096, 40 levels: 10**12); the walk stops at the first folder reached too often."""
    depth = 12
    levels = [tmp_path / f"level{i}" for i in range(depth + 1)]
    for level in levels:
        level.mkdir()
    (levels[-1] / "x.jpg").write_bytes(b"x")
    for upper, lower in zip(levels, levels[1:], strict=False):
        (upper / "a").symlink_to(lower)
        (upper / "b").symlink_to(lower)
    with pytest.raises(DataCorruptError, match=f"through more than {MAX_FOLDER_VISITS} paths"):
        list(files_below(levels[0]))
    # six levels reach the last folder 2**6 = 64 times: allowed, every path listed
    assert len(list(files_below(levels[depth - 6]))) == 2**6


def test_a_tree_deeper_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    made = [tmp_path / "root"]
    for _ in range(1200):
        made.append(made[-1] / "d")
    try:
        for folder in made:
            folder.mkdir()
        (made[-1] / "x.jpg").write_bytes(b"x")
        (made[600] / "a.jpg").write_bytes(b"a")
        found = list(files_below(made[0]))
        assert [p.name for p in found] == ["a.jpg", "x.jpg"]  # "a.jpg" sorts before the folder "d"
        assert found[1] == made[-1] / "x.jpg"
    finally:  # shutil.rmtree (pytest's clean-up too) recurses
        for file in (made[-1] / "x.jpg", made[600] / "a.jpg"):
            file.unlink(missing_ok=True)
        for folder in reversed(made):
            if folder.exists():
                folder.rmdir()
