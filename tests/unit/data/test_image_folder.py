"""ImageFolder reader (folder and tar.gz, PNG and JPEG) and the CINIC-10 / CIFAR-10 JPEG layouts."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from raysfl.data import (
    DATASETS,
    DataConfig,
    DataCorruptError,
    load_dataset,
    read_image_folder,
    read_image_tarball,
)
from raysfl.data.cache import cache_dir


def _expected(tree: dict, split: str) -> tuple[np.ndarray, np.ndarray]:
    classes = sorted(tree[split])
    xs = [a for c in classes for a in tree[split][c]]
    ys = [i for i, c in enumerate(classes) for _ in tree[split][c]]
    return np.stack(xs), np.asarray(ys)


def test_png_folder_is_exact_and_labels_follow_sorted_class_names(
    tmp_path: Path, make_image_tree: Callable
) -> None:
    tree = make_image_tree(tmp_path / "imgs")
    splits, classes = read_image_folder(tmp_path / "imgs")
    assert classes == ("airplane", "cat", "dog")
    for split in ("train", "test"):
        x, y = _expected(tree, split)
        np.testing.assert_array_equal(splits[split][0], x)
        np.testing.assert_array_equal(splits[split][1], y)
        assert splits[split][0].dtype == np.uint8 and splits[split][1].dtype == np.int64
        assert splits[split][0].flags["C_CONTIGUOUS"]


def test_jpeg_folder_decodes_close_to_the_source(tmp_path: Path, make_image_tree: Callable) -> None:
    tree = make_image_tree(tmp_path / "imgs", fmt="JPEG")
    splits, _ = read_image_folder(tmp_path / "imgs", size=32)
    x, _ = _expected(tree, "train")
    assert np.abs(splits["train"][0].astype(int) - x).max() <= 8


def test_grey_png_folder(tmp_path: Path, make_image_tree: Callable) -> None:
    tree = make_image_tree(tmp_path / "imgs", channels=1, size=28)
    splits, _ = read_image_folder(tmp_path / "imgs", channels=1)
    assert splits["test"][0].shape == (9, 1, 28, 28)
    np.testing.assert_array_equal(splits["test"][0], _expected(tree, "test")[0])


@pytest.mark.parametrize("top", ["CIFAR10-jpg", ""])
def test_tarball_equals_the_folder(
    tmp_path: Path, make_image_tree: Callable, tar_folder: Callable, top: str
) -> None:
    make_image_tree(tmp_path / "imgs")
    archive = tar_folder(tmp_path / "imgs", tmp_path / "imgs.tar.gz", top)
    from_tar, classes_tar = read_image_tarball(archive)
    from_dir, classes_dir = read_image_folder(tmp_path / "imgs")
    assert classes_tar == classes_dir
    for split in ("train", "test"):
        np.testing.assert_array_equal(from_tar[split][0], from_dir[split][0])
        np.testing.assert_array_equal(from_tar[split][1], from_dir[split][1])


def test_an_archive_image_larger_than_any_image_is_refused_unread(
    tmp_path: Path, make_image_tree: Callable, tar_folder: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    import raysfl.data.imagefolder as imagefolder

    make_image_tree(tmp_path / "imgs")
    archive = tar_folder(tmp_path / "imgs", tmp_path / "imgs.tar.gz", "")
    largest = max(p.stat().st_size for p in (tmp_path / "imgs").rglob("*.png"))
    monkeypatch.setattr(imagefolder, "MAX_IMAGE_BYTES", largest - 1)  # stands in for a huge member
    with pytest.raises(DataCorruptError, match=f": {largest} bytes, more than an image of a dataset"):
        read_image_tarball(archive)
    monkeypatch.setattr(imagefolder, "MAX_IMAGE_BYTES", largest)
    assert read_image_tarball(archive)[0]["train"][0].shape[0] > 0


def test_damaged_trees_raise_data_corrupt(tmp_path: Path, make_image_tree: Callable) -> None:
    make_image_tree(tmp_path / "a")
    (tmp_path / "a" / "train" / "cat" / "0001.png").write_bytes(b"\x89PNG broken")
    with pytest.raises(DataCorruptError, match=r"train/cat/0001\.png: cannot decode"):
        read_image_folder(tmp_path / "a")
    make_image_tree(tmp_path / "b")
    (tmp_path / "b" / "test" / "horse").mkdir()
    (tmp_path / "b" / "test" / "horse" / "0000.png").write_bytes(
        (tmp_path / "b" / "test" / "cat" / "0000.png").read_bytes()
    )
    with pytest.raises(DataCorruptError, match="class folders differ"):
        read_image_folder(tmp_path / "b")
    make_image_tree(tmp_path / "c", size=30)
    with pytest.raises(DataCorruptError, match="expected 32x32"):
        read_image_folder(tmp_path / "c", size=32)
    with pytest.raises(DataCorruptError, match="missing split folder 'test/'"):
        make_image_tree(tmp_path / "d", splits=("train",))
        read_image_folder(tmp_path / "d")
    (tmp_path / "e.tar.gz").write_bytes(b"\x1f\x8b\x08\x00truncated")
    with pytest.raises(DataCorruptError, match="e.tar.gz"):
        read_image_tarball(tmp_path / "e.tar.gz")


@pytest.fixture
def small_counts(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, int | None, int | None], None]:
    """Let load_dataset accept tiny fixtures by replacing the registry's expected sample counts."""

    def set_counts(name: str, train: int | None, test: int | None) -> None:
        info = dataclasses.replace(DATASETS[name], train_size=train, test_size=test)
        monkeypatch.setitem(DATASETS, name, info)

    return set_counts


def test_cinic_layout_loads_train_and_test_and_ignores_valid(
    tmp_path: Path, make_image_tree: Callable, small_counts: Callable
) -> None:
    classes = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
    make_image_tree(
        tmp_path / "root" / "CINIC-10", splits=("train", "valid", "test"), classes=classes, per_class=2
    )
    small_counts("cinic10", 20, 20)
    ds = load_dataset(DataConfig(dataset="cinic10", download=False), str(tmp_path / "root"))
    assert ds.train_x.shape == (20, 3, 32, 32) and ds.test_x.shape == (20, 3, 32, 32)
    assert ds.classes == classes and ds.source.endswith("CINIC-10") and not ds.synthetic
    assert ds.mean == DATASETS["cinic10"].mean
    small_counts("cinic10", 90000, 90000)
    with pytest.raises(DataCorruptError, match="expected 90000 training samples"):
        load_dataset(DataConfig(dataset="cinic10", download=False), str(tmp_path / "root"))


@pytest.mark.parametrize("where", ["CIFAR10-jpg", "."])
def test_cifar10_jpeg_folder_in_or_directly_under_the_root(
    tmp_path: Path, make_image_tree: Callable, small_counts: Callable, where: str
) -> None:
    classes = tuple(f"c{i}" for i in range(10))
    tree = make_image_tree(tmp_path / "root" / where, classes=classes, per_class=1, fmt="JPEG")
    small_counts("cifar10", 10, 10)
    ds = load_dataset(DataConfig(dataset="cifar10", download=False), str(tmp_path / "root"))
    assert ds.title == "CIFAR-10 (JPEG q75)" and ds.train_y.tolist() == list(range(10))
    assert np.abs(ds.test_x.astype(int) - _expected(tree, "test")[0]).max() <= 8


def test_decoded_images_are_cached_and_the_cache_follows_the_source(
    tmp_path: Path, make_image_tree: Callable, tar_folder: Callable, small_counts: Callable
) -> None:
    classes = tuple(f"c{i}" for i in range(10))
    make_image_tree(tmp_path / "imgs", classes=classes, per_class=1)
    (tmp_path / "root").mkdir()
    tar_folder(tmp_path / "imgs", tmp_path / "root" / "cifar10-jpg.tar.gz", "CIFAR10-jpg")
    small_counts("cifar10", 10, 10)
    cfg = DataConfig(dataset="cifar10", download=False)
    cache_dir().mkdir(parents=True)
    first_format = cache_dir() / "cifar10-imagefolder-tar-3c-0123456789abcdef01234567.npz"
    other_tag = cache_dir() / "mnist-idx-0123456789abcdef01234567.npz"
    for planted in (first_format, other_tag):
        planted.write_bytes(b"an entry of the first cache format")
    first = load_dataset(cfg, str(tmp_path / "root"))
    assert not first_format.exists() and other_tag.exists()  # the first format's entry of this tag is swept
    other_tag.unlink()
    entries = list(cache_dir().glob("*.npz"))
    assert len(entries) == 1 and cache_dir().resolve().is_relative_to(tmp_path)
    second = load_dataset(cfg, str(tmp_path / "root"))
    np.testing.assert_array_equal(first.train_x, second.train_x)
    assert len(list(cache_dir().glob("*.npz"))) == 1
    # A changed source (new size/mtime) gets a new entry instead of stale arrays, which replaces the old one.
    make_image_tree(tmp_path / "imgs", classes=classes, per_class=1, seed=5)
    tar_folder(tmp_path / "imgs", tmp_path / "root" / "cifar10-jpg.tar.gz", "CIFAR10-jpg")
    third = load_dataset(cfg, str(tmp_path / "root"))
    assert [p.name for p in cache_dir().glob("*.npz")] != [p.name for p in entries]
    assert len(list(cache_dir().glob("*.npz"))) == 1
    assert not np.array_equal(first.train_x, third.train_x)


def _cifar10_folder(tmp_path: Path, make_image_tree: Callable, small_counts: Callable) -> tuple:
    """A 10-class, 2-per-class CIFAR-10 image tree under ``root/CIFAR10-jpg/``, and its config."""
    classes = tuple(f"c{i}" for i in range(10))
    make_image_tree(tmp_path / "root" / "CIFAR10-jpg", classes=classes, per_class=2, fmt="JPEG")
    small_counts("cifar10", 20, 20)
    return tmp_path / "root", DataConfig(dataset="cifar10", download=False)


def _fresh(cfg: DataConfig, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    """The dataset decoded into an empty cache (what the cached load must equal)."""
    monkeypatch.setenv("RAYSFL_CACHE", str(tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}"))
    ds = load_dataset(cfg, str(root))
    monkeypatch.setenv("RAYSFL_CACHE", str(tmp_path / "cache"))
    return ds


@pytest.mark.parametrize(
    "change", ["move a file between classes", "swap two class names", "behind a link", "a second link"]
)
def test_a_folders_cache_entry_follows_every_file(
    tmp_path: Path, make_image_tree: Callable, small_counts: Callable, monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:  # fmt: skip
    """The folder fingerprint was the file count, total size and newest mtime: moving a file to another
    class folder (a label fix with mv) or swapping two folders' names kept all three, and the cache gave the
    old labels. Now every file's path, size and mtime count, links followed."""
    root, cfg = _cifar10_folder(tmp_path, make_image_tree, small_counts)
    train = root / "CIFAR10-jpg" / "train"
    linked = "c0" if change == "a second link" else "c9"
    if change in ("behind a link", "a second link"):  # a class folder is a link to a folder elsewhere
        (tmp_path / "elsewhere").mkdir()
        (train / linked).rename(tmp_path / "elsewhere" / linked)
        (train / linked).symlink_to(tmp_path / "elsewhere" / linked)
    before = load_dataset(cfg, str(root))
    if change == "move a file between classes":
        moved = next((train / "c0").iterdir())
        moved.rename(train / "c1" / f"moved-{moved.name}")
        (train / "c1" / "0000.jpg").rename(train / "c0" / "0000.jpg")  # counts per class stay the same
    elif change == "swap two class names":
        (train / "c0").rename(train / "tmp")
        (train / "c1").rename(train / "c0")
        (train / "tmp").rename(train / "c1")
    elif change == "behind a link":
        target = next((tmp_path / "elsewhere" / "c9").iterdir())
        other = next((train / "c8").iterdir())
        stat = target.stat()
        target.write_bytes(other.read_bytes())
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same mtime: only the size tells
    else:  # c5 links to c0's folder too, which a walk has seen before: its images are now under both
        small_counts("cifar10", None, 20)
        (train / "c5" / "more").symlink_to(tmp_path / "elsewhere" / "c0")
    cached = load_dataset(cfg, str(root))
    fresh = _fresh(cfg, root, tmp_path, monkeypatch)
    assert not (
        np.array_equal(cached.train_x, before.train_x) and np.array_equal(cached.train_y, before.train_y)
    )
    np.testing.assert_array_equal(cached.train_x, fresh.train_x)
    np.testing.assert_array_equal(cached.train_y, fresh.train_y)
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1  # the older state's entry was removed


def test_a_dangling_link_in_an_image_tree_is_named_by_the_reader(
    tmp_path: Path, make_image_tree: Callable, small_counts: Callable
) -> None:
    """The cache's fingerprint stat-ed every file and raised a bare FileNotFoundError (a traceback)."""
    root, cfg = _cifar10_folder(tmp_path, make_image_tree, small_counts)
    link = root / "CIFAR10-jpg" / "train" / "c0" / "0000.jpg"
    link.unlink()
    link.symlink_to(tmp_path / "gone.jpg")
    with pytest.raises(DataCorruptError, match=r"train/c0/0000\.jpg"):
        load_dataset(cfg, str(root))


def test_images_in_a_linked_folder_inside_a_class_folder_are_read(
    tmp_path: Path, make_image_tree: Callable, small_counts: Callable
) -> None:
    """rglob did not follow a linked sub-folder: its images were missing, found only by the sample count."""
    root, cfg = _cifar10_folder(tmp_path, make_image_tree, small_counts)
    c0 = root / "CIFAR10-jpg" / "train" / "c0"
    (tmp_path / "extra").mkdir()
    for image in sorted(c0.iterdir()):
        image.rename(tmp_path / "extra" / image.name)
    (c0 / "more").symlink_to(tmp_path / "extra")
    ds = load_dataset(cfg, str(root))
    assert ds.train_y.tolist().count(0) == 2
