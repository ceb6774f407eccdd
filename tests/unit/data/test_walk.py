"""One walk of a folder for the image reader and the cache: sorted, links followed, cycles cut."""

from pathlib import Path

from raysfl.data.walk import files_below


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
