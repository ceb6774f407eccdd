"""Where load_dataset looks for data, in which order, and what it says when nothing is found."""

from __future__ import annotations

import dataclasses
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from raysfl.data import DATASETS, DataConfig, DataCorruptError, DataNotFoundError, load_dataset
from raysfl.data.locate import find_source, search_places
from raysfl.data.sources import RawData, content_digest

OFFLINE = DataConfig(dataset="mnist", download=False)


@pytest.fixture(autouse=True)
def tiny_mnist(monkeypatch: pytest.MonkeyPatch) -> None:
    """Accept tiny MNIST fixtures: no 60000/10000 count and no release to compare with (both are tested
    on their own)."""
    for name in ("mnist", "fashion-mnist"):
        tiny = dataclasses.replace(DATASETS[name], train_size=None, test_size=None, release_digest="")
        monkeypatch.setitem(DATASETS, name, tiny)


def test_a_copy_is_compared_with_the_official_release(
    tmp_path: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MNIST's files under --data-dir for Fashion-MNIST passed every check (counts, shapes, labels); the
    images and labels are now compared with the release's digest, and another copy is named in a warning."""
    make_idx_dir(tmp_path / "release" / "mnist", seed=1)
    cfg = OFFLINE
    release = load_dataset(cfg, str(tmp_path / "release"))
    assert release.release is None  # the fixture has no release digest
    raw = RawData(release.train_x, release.train_y, release.test_x, release.test_y)
    monkeypatch.setitem(
        DATASETS, "mnist", dataclasses.replace(DATASETS["mnist"], release_digest=content_digest(raw))
    )
    assert load_dataset(cfg, str(tmp_path / "release")).release is True
    make_idx_dir(tmp_path / "other" / "mnist", seed=2)
    with pytest.warns(
        UserWarning, match=r"other/mnist: these are not the images and labels of the official MNIST"
    ):
        assert load_dataset(cfg, str(tmp_path / "other")).release is False


def _seed_of(ds_train_x: np.ndarray, candidates: dict[int, np.ndarray]) -> int:
    return next(seed for seed, x in candidates.items() if np.array_equal(x[:, None], ds_train_x))


def test_data_dir_beats_env_beats_cwd_data(
    tmp_path: Path, isolated_env: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = {
        1: make_idx_dir(tmp_path / "explicit" / "mnist", seed=1)[0],
        2: make_idx_dir(tmp_path / "env" / "mnist", seed=2)[0],
        3: make_idx_dir(isolated_env / "data" / "mnist", seed=3)[0],
        4: make_idx_dir(tmp_path / "override" / "mnist", seed=4)[0],
    }
    monkeypatch.setenv("RAYSFL_DATA", str(tmp_path / "env"))
    cfg = dataclasses.replace(OFFLINE, data_dir=str(tmp_path / "explicit"))
    assert _seed_of(load_dataset(cfg, str(tmp_path / "override")).train_x, copies) == 4
    assert _seed_of(load_dataset(cfg).train_x, copies) == 1
    assert _seed_of(load_dataset(OFFLINE).train_x, copies) == 2
    monkeypatch.delenv("RAYSFL_DATA")
    ds = load_dataset(OFFLINE)
    assert _seed_of(ds.train_x, copies) == 3 and ds.source == str(isolated_env / "data" / "mnist")


def test_a_place_without_the_data_is_skipped(
    tmp_path: Path, isolated_env: Path, make_idx_dir: Callable
) -> None:
    (tmp_path / "empty").mkdir()
    make_idx_dir(isolated_env / "data" / "mnist", seed=3)
    cfg = dataclasses.replace(OFFLINE, data_dir=str(tmp_path / "empty"))
    assert load_dataset(cfg).source == str(isolated_env / "data" / "mnist")


@pytest.mark.parametrize("damage", ["missing", "dangling link", "a folder"])
def test_an_incomplete_copy_in_a_named_place_is_refused(
    tmp_path: Path, isolated_env: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A copy under --data-dir, data.data_dir or $RAYSFL_DATA that lacks a file was passed over for ./data
    without a word (the only trace: the dataset's source); it is an error naming the missing file."""
    make_idx_dir(isolated_env / "data" / "mnist", seed=3)  # a complete copy further down the search
    make_idx_dir(tmp_path / "mine" / "mnist", seed=1)
    labels = next((tmp_path / "mine" / "mnist").glob("t10k-labels*"))
    labels.unlink()
    if damage == "dangling link":
        labels.symlink_to(tmp_path / "gone")
    elif damage == "a folder":
        labels.mkdir()
    for cfg, override in [
        (OFFLINE, str(tmp_path / "mine")),
        (dataclasses.replace(OFFLINE, data_dir=str(tmp_path / "mine")), None),
    ]:
        with pytest.raises(DataCorruptError, match=r"an incomplete copy of MNIST: .*mnist lacks t10k-labels"):
            load_dataset(cfg, override)
    monkeypatch.setenv("RAYSFL_DATA", str(tmp_path / "mine"))
    with pytest.raises(DataCorruptError, match=r"\$RAYSFL_DATA .*: an incomplete copy"):
        load_dataset(OFFLINE)
    monkeypatch.delenv("RAYSFL_DATA")
    assert load_dataset(OFFLINE).source == str(isolated_env / "data" / "mnist")  # ./data: as before


def test_a_data_dir_that_does_not_exist_is_refused(
    tmp_path: Path, isolated_env: Path, make_idx_dir: Callable
) -> None:
    """A mistyped data.data_dir used to be passed over for ./data without a word (--data-dir is refused)."""
    make_idx_dir(isolated_env / "data" / "mnist", seed=3)
    cfg = dataclasses.replace(OFFLINE, data_dir=str(tmp_path / "typo"))
    with pytest.raises(DataNotFoundError, match=r"data.data_dir: .*typo is not a directory"):
        load_dataset(cfg)
    # --data-dir replaces a scenario's folder from another machine: then it is only listed if nothing is found
    assert load_dataset(cfg, str(isolated_env / "data")).source == str(isolated_env / "data" / "mnist")


@pytest.mark.parametrize("sub", ["fashion-mnist", "FashionMNIST/raw", "."])
@pytest.mark.parametrize("gz", [True, False])
def test_layouts_inside_a_root(tmp_path: Path, make_idx_dir: Callable, sub: str, gz: bool) -> None:
    arrays = make_idx_dir(tmp_path / "root" / sub, gz=gz, n_train=7, n_test=3)
    ds = load_dataset(DataConfig(dataset="fashion-mnist", download=False), str(tmp_path / "root"))
    assert ds.train_x.shape == (7, 1, 28, 28) and ds.test_x.shape == (3, 1, 28, 28)
    # the standard strides, not the channel-axis stride 0 of x[:, None] (determinism: row_major)
    assert ds.train_x.strides == ds.test_x.strides == (784, 784, 28, 1)
    np.testing.assert_array_equal(ds.train_x[:, 0], arrays[0])
    np.testing.assert_array_equal(ds.test_y, arrays[3].astype(np.int64))
    assert ds.mean == (0.2860,) and ds.std == (0.3530,)


def test_debian_system_folder_is_searched_after_data(tmp_path: Path, make_idx_dir: Callable) -> None:
    system = tmp_path / "usr" / "share" / "datasets" / "fashion-mnist"
    make_idx_dir(system)
    info = dataclasses.replace(DATASETS["fashion-mnist"], system_dirs=(str(system),))
    places = search_places(info, None, "")
    assert [p.why for p in places] == ["./data", "system folder"]
    found = find_source(info, places)
    assert found is not None and found.path == system and found.kind == "idx"
    assert DATASETS["fashion-mnist"].system_dirs == ("/usr/share/datasets/fashion-mnist",)


def test_not_found_lists_every_place_and_how_to_get_the_data(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYSFL_DATA", str(tmp_path / "env"))
    # The host may have Debian's package installed (CI does): search an empty system folder instead.
    system = tmp_path / "usr" / "share" / "datasets" / "fashion-mnist"
    monkeypatch.setitem(
        DATASETS, "fashion-mnist", dataclasses.replace(DATASETS["fashion-mnist"], system_dirs=(str(system),))
    )
    cfg = DataConfig(dataset="fashion-mnist", data_dir=str(tmp_path / "mine"), download=False)
    with pytest.raises(DataNotFoundError) as err:
        load_dataset(cfg, str(tmp_path / "cli"))
    text = str(err.value)
    for where in (tmp_path / "cli", tmp_path / "mine", tmp_path / "env", isolated_env / "data", system):
        assert str(where) in text
    assert "apt-get install dataset-fashion-mnist" in text
    assert "disabled (data.download = false)" in text and "Layout: <root>/fashion-mnist/" in text
    assert (
        text.index(str(tmp_path / "cli"))
        < text.index(str(tmp_path / "mine"))
        < text.index(str(tmp_path / "env"))
    )


def test_failed_download_is_clean(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def offline(url: str, timeout: float) -> None:
        calls.append((url, timeout))
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(DataNotFoundError, match="could not download .*network is unreachable"):
        load_dataset(DataConfig(dataset="mnist"))
    assert calls and all(timeout <= 30 for _, timeout in calls)
    assert not (isolated_env / "data").exists(), "a failed download must leave no empty ./data behind"


def test_successful_download_goes_to_cwd_data(
    isolated_env: Path, tmp_path: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_idx_dir(tmp_path / "mirror", seed=7)

    def fake(url: str, timeout: float):  # noqa: ANN202 - stands in for urllib.request.urlopen
        return (tmp_path / "mirror" / url.rsplit("/", 1)[-1]).open("rb")

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    ds = load_dataset(DataConfig(dataset="mnist"))
    assert ds.source == str(isolated_env / "data" / "mnist") and ds.train_x.shape[0] == 12
    assert not list((isolated_env / "data" / "mnist").glob("*.part"))


def test_a_download_that_is_not_the_release_is_removed_and_one_that_is_kept(
    isolated_env: Path, tmp_path: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fashion-MNIST's server is plain HTTP: files altered on the way were kept in ./data and loaded with
    a warning, and every later run found them there. A fetched copy must now be the release's content."""
    make_idx_dir(tmp_path / "mirror" / "mnist", seed=7)
    served = load_dataset(OFFLINE, str(tmp_path / "mirror"))
    digest = content_digest(RawData(served.train_x, served.train_y, served.test_x, served.test_y))

    def fake(url: str, timeout: float):  # noqa: ANN202 - stands in for urllib.request.urlopen
        return (tmp_path / "mirror" / "mnist" / url.rsplit("/", 1)[-1]).open("rb")

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    fetched = isolated_env / "data" / "mnist"
    monkeypatch.setitem(DATASETS, "mnist", dataclasses.replace(DATASETS["mnist"], release_digest="0" * 64))
    with pytest.raises(DataNotFoundError, match=r"not the official MNIST release .*they were removed"):
        load_dataset(DataConfig(dataset="mnist"))
    assert not fetched.exists() or not any(fetched.iterdir())

    monkeypatch.setitem(DATASETS, "mnist", dataclasses.replace(DATASETS["mnist"], release_digest=digest))
    ds = load_dataset(DataConfig(dataset="mnist"))
    assert ds.source == str(fetched) and ds.release is True


def test_wrong_sample_count_is_corrupt(
    tmp_path: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(DATASETS, "mnist", dataclasses.replace(DATASETS["mnist"], train_size=60000))
    make_idx_dir(tmp_path / "mnist")
    with pytest.raises(DataCorruptError, match=r"mnist: expected 60000 training samples .* found 12"):
        load_dataset(OFFLINE, str(tmp_path))


def test_truncated_file_in_a_found_copy_names_the_file(tmp_path: Path, make_idx_dir: Callable) -> None:
    make_idx_dir(tmp_path / "mnist", gz=False)
    path = tmp_path / "mnist" / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataCorruptError, match="t10k-images-idx3-ubyte.*truncated"):
        load_dataset(OFFLINE, str(tmp_path))


def test_images_and_labels_disagree(tmp_path: Path, make_idx_dir: Callable) -> None:
    make_idx_dir(tmp_path / "mnist")
    make_idx_dir(tmp_path / "other", n_train=11)
    (tmp_path / "mnist" / "train-labels-idx1-ubyte.gz").write_bytes(
        (tmp_path / "other" / "train-labels-idx1-ubyte.gz").read_bytes()
    )
    with pytest.raises(DataCorruptError, match="12 images but the labels file has 11"):
        load_dataset(OFFLINE, str(tmp_path))


def test_an_incomplete_cifar_batch_folder_in_a_named_place_is_refused(tmp_path: Path) -> None:
    """One of the two batch files that tell a CIFAR-10 python copy, without the other: named, not passed
    over (a train/ folder alone is not taken for anything: it may be another dataset's)."""
    batches = tmp_path / "mine" / "cifar-10-batches-py"
    batches.mkdir(parents=True)
    (batches / "data_batch_1").write_bytes(b"")
    (tmp_path / "mine" / "train").mkdir()
    cfg = DataConfig(dataset="cifar10", download=False)
    with pytest.raises(DataCorruptError, match=r"cifar-10-batches-py has data_batch_1 but not test_batch"):
        load_dataset(cfg, str(tmp_path / "mine"))


def test_check_reachable_says_what_load_dataset_would_and_reads_nothing(
    tmp_path: Path, make_idx_dir: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep refuses unreachable data before it starts Ray with the message a run's driver gives."""
    from raysfl.data.load import check_reachable

    system = tmp_path / "empty-system"
    monkeypatch.setitem(
        DATASETS, "fashion-mnist", dataclasses.replace(DATASETS["fashion-mnist"], system_dirs=(str(system),))
    )
    offline = DataConfig(dataset="fashion-mnist", download=False)
    with pytest.raises(DataNotFoundError) as err:
        check_reachable(offline, str(tmp_path / "cli"))
    with pytest.raises(DataNotFoundError) as loaded:
        load_dataset(offline, str(tmp_path / "cli"))
    assert str(err.value) == str(loaded.value)
    check_reachable(DataConfig(dataset="synthetic"))  # generated: nothing to find
    check_reachable(DataConfig(dataset="fashion-mnist", download=True))  # a download may be tried
    assert not (Path.cwd() / "data").exists()  # ...but is not: nothing fetched or written
    make_idx_dir(tmp_path / "cli" / "fashion-mnist")
    check_reachable(offline, str(tmp_path / "cli"))
    with pytest.raises(DataNotFoundError, match="data.data_dir: .* is not a directory"):
        check_reachable(DataConfig(dataset="mnist", data_dir=str(tmp_path / "nowhere")))
