"""The real datasets in ``$RAYSFL_DATA`` or ``shared/data`` (next to the repository), when present: counts
and channel means.

CIFAR-10 is decoded from 60000 JPEGs on first use (about 20 s on 2 cores), then read from the user's
data cache (``$RAYSFL_CACHE`` or ``~/.cache/raysfl``) in well under a second.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from raysfl.data import DataConfig, load_dataset, make_transform, partition_dataset, to_batch
from tests.conftest import data_root

SHARED_DATA = data_root()
USER_CACHE = os.environ.get("RAYSFL_CACHE")


@pytest.fixture(autouse=True)
def user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the normal cache so the CIFAR-10 JPEG decode happens once per machine, not once per run."""
    if USER_CACHE is None:
        monkeypatch.delenv("RAYSFL_CACHE", raising=False)
    else:
        monkeypatch.setenv("RAYSFL_CACHE", USER_CACHE)


def _need(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(
            f"real data not available: {path} is absent (set RAYSFL_DATA, or shared/data beside the repo)"
        )
    return path


def _load(name: str):  # noqa: ANN202 - returns ImageDataset
    return load_dataset(DataConfig(dataset=name, download=False), str(SHARED_DATA))


@pytest.mark.parametrize("name, mean, std", [("fashion-mnist", 0.2860, 0.3530), ("mnist", 0.1307, 0.3081)])
def test_idx_datasets(name: str, mean: float, std: float) -> None:
    _need(name)
    ds = _load(name)
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert ds.source == str(SHARED_DATA / name) and not ds.synthetic
    counts = np.bincount(ds.train_x.ravel(), minlength=256)  # pixel histogram: exact, no float copy
    levels = np.arange(256) / 255.0
    m = (counts * levels).sum() / counts.sum()
    s = np.sqrt((counts * (levels - m) ** 2).sum() / counts.sum())
    assert abs(m - mean) < 5e-4 and abs(s - std) < 5e-4
    assert np.bincount(ds.train_y, minlength=10).min() > 5000
    assert ds.mean == (mean,)


def test_fashion_mnist_gas_normalization_and_shard_split() -> None:
    _need("fashion-mnist")
    cfg = DataConfig(normalization="gas-code", download=False)
    ds = load_dataset(cfg, str(SHARED_DATA))
    assert ds.mean == (0.286,) and ds.std == (0.3205,)
    part = partition_dataset(ds.train_y, cfg, 20, np.random.default_rng(2023))
    assert part.sizes.tolist() == [3000] * 20 and ((part.histograms > 0).sum(axis=1) <= 2).all()


def test_cifar10_jpeg_tarball() -> None:
    _need("cifar10-jpg.tar.gz")
    ds = _load("cifar10")
    assert ds.train_x.shape == (50000, 3, 32, 32) and ds.test_x.shape == (10000, 3, 32, 32)
    assert ds.title == "CIFAR-10 (JPEG q75)"
    assert ds.classes == (
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    )
    assert np.bincount(ds.train_y).tolist() == [5000] * 10 and np.bincount(ds.test_y).tolist() == [1000] * 10
    means = ds.train_x.mean(axis=(0, 2, 3), dtype=np.float64) / 255
    np.testing.assert_allclose(means, (0.4913, 0.4821, 0.4465), atol=1e-3)
    cfg = DataConfig(dataset="cifar10")
    batch = to_batch(ds.test_x, np.arange(0, 10000, 10), make_transform(ds, cfg), train=False)
    assert abs(float(batch.mean())) < 0.05 and abs(float(batch.std()) - 1) < 0.05


@pytest.mark.parametrize(("name", "other"), [("fashion-mnist", "mnist"), ("mnist", "fashion-mnist")])
def test_the_idx_copies_are_the_official_releases_and_each_other_is_not(
    name: str, other: str, tmp_path: Path
) -> None:
    """The registry's release digests are those of shared/data's copies (the official files); the other
    dataset's files in a folder of this one's name load (the same counts and shapes) with a warning."""
    _need(f"{name}/train-images-idx3-ubyte.gz")
    assert _load(name).release is True
    swapped = tmp_path / name
    swapped.mkdir()
    for f in (SHARED_DATA / other).iterdir():
        (swapped / f.name).symlink_to(f)
    with pytest.warns(UserWarning, match=f"not the images and labels of the official {_load(name).title}"):
        ds = load_dataset(DataConfig(dataset=name, download=False), str(tmp_path))
    assert ds.release is False
