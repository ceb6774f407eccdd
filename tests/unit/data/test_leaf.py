"""LEAF FEMNIST JSON: samples, labels and the writer of every sample; natural partition by writer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from raysfl.data import DataConfig, DataCorruptError, load_dataset, partition_dataset, read_leaf_femnist


def test_reader_keeps_order_pixels_labels_and_writers(tmp_path: Path, make_leaf: Callable) -> None:
    record = make_leaf(tmp_path / "femnist")
    train, test, writers = read_leaf_femnist(tmp_path / "femnist")
    assert writers == ("f0001_12", "f0002_33", "f0107_45")
    assert train.x.shape == (15, 1, 28, 28) and train.x.dtype == np.uint8
    expected_y = [y for _, _, ys in record["train"] for y in ys]
    assert train.y.tolist() == expected_y and test.y.shape == (6,)
    assert train.writers.tolist() == [0] * 4 + [1] * 6 + [2] * 5
    assert test.writers.tolist() == [0] * 2 + [1] + [2] * 3
    first = np.asarray(record["train"][0][1][0]).reshape(28, 28)
    np.testing.assert_array_equal(train.x[0, 0], np.rint(first * 255).astype(np.uint8))


def test_load_dataset_from_leaf_layout_and_natural_partition(tmp_path: Path, make_leaf: Callable) -> None:
    make_leaf(tmp_path / "root" / "leaf" / "data" / "femnist" / "data")
    cfg = DataConfig(dataset="femnist", partition="natural", download=False)
    ds = load_dataset(cfg, str(tmp_path / "root"))
    assert ds.num_classes == 62 and ds.writer_names == ("f0001_12", "f0002_33", "f0107_45")
    assert ds.train_writers is not None and ds.mean == (0.0,) and ds.std == (1.0,)
    part = partition_dataset(
        ds.train_y, cfg, 3, np.random.default_rng(0), writers=ds.train_writers, num_classes=62
    )
    assert part.sizes.tolist() == [4, 6, 5]
    for k, idx in enumerate(part.indices):
        assert set(ds.train_writers[idx].tolist()) == {k}
    sub = partition_dataset(
        ds.train_y, cfg, 2, np.random.default_rng(1), writers=ds.train_writers, num_classes=62
    )
    assert sub.num_clients == 2 and all(len(set(ds.train_writers[i].tolist())) == 1 for i in sub.indices)


def test_malformed_leaf_files(tmp_path: Path, make_leaf: Callable) -> None:
    make_leaf(tmp_path / "a")
    path = next((tmp_path / "a" / "train").glob("*.json"))
    blob = json.loads(path.read_text())
    user = blob["users"][0]
    blob["user_data"][user]["x"][0] = blob["user_data"][user]["x"][0][:-1]
    path.write_text(json.dumps(blob))
    with pytest.raises(DataCorruptError, match=f"{path.name}.*{user}"):
        read_leaf_femnist(tmp_path / "a")
    path.write_text("{not json")
    with pytest.raises(DataCorruptError, match="not a readable LEAF JSON"):
        read_leaf_femnist(tmp_path / "a")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda blob, user: blob["num_samples"].pop(), "num_samples has 1 entries for 2 users"),
        (lambda blob, user: blob.update(num_samples=None), "num_samples is a NoneType for 2 users"),
        (lambda blob, user: blob["user_data"][user].update(y=[1e999] * len(blob["user_data"][user]["y"])),
         r"labels must be whole numbers, got \[inf, inf, inf\]"),
        (lambda blob, user: blob["user_data"][user].update(y=[1.7] * len(blob["user_data"][user]["y"])),
         r"labels must be whole numbers, got \[1.7, 1.7, 1.7\]"),
        (lambda blob, user: blob["users"].append(user) or blob["num_samples"].append(
            blob["num_samples"][0]), "is listed twice in this split"),
    ],
)  # fmt: skip
def test_leaf_files_that_would_lose_or_alter_samples_are_refused(
    tmp_path: Path, make_leaf: Callable, damage: Callable, message: str
) -> None:
    """A short num_samples dropped a user (zip stopped early), labels 1.7 were truncated to 1, and a user
    listed twice counted twice: each loaded without a word."""
    make_leaf(tmp_path / "a")
    path = sorted((tmp_path / "a" / "train").glob("*.json"))[0]
    blob = json.loads(path.read_text())
    assert len(blob["users"]) == 2, "the fixture's first train file holds two users"
    damage(blob, blob["users"][0])
    path.write_text(json.dumps(blob))
    with pytest.raises(DataCorruptError, match=message):
        read_leaf_femnist(tmp_path / "a")
