"""The synthetic dataset: marked as synthetic, deterministic, and learnable."""

from __future__ import annotations

import numpy as np
import torch

from raysfl.data import DataConfig, load_dataset, make_transform, to_batch

CFG = DataConfig(dataset="synthetic", synthetic_train=1000, synthetic_test=300)


def test_marked_synthetic_and_well_formed() -> None:
    ds = load_dataset(CFG)
    assert ds.synthetic and "synthetic" in ds.name and "synthetic" in ds.source and "SYNTHETIC" in repr(ds)
    assert ds.train_x.shape == (1000, 1, 28, 28) and ds.train_x.dtype == np.uint8
    assert ds.test_y.dtype == np.int64 and ds.num_classes == 10
    assert np.bincount(ds.train_y).tolist() == [100] * 10


def test_deterministic_from_the_seed() -> None:
    a, b = load_dataset(CFG), load_dataset(CFG)
    c = load_dataset(
        DataConfig(dataset="synthetic", synthetic_train=1000, synthetic_test=300, synthetic_seed=1)
    )
    assert np.array_equal(a.train_x, b.train_x) and np.array_equal(a.test_y, b.test_y)
    assert not np.array_equal(a.train_x, c.train_x)


def test_shape_options() -> None:
    cfg = DataConfig(
        dataset="synthetic",
        synthetic_train=60,
        synthetic_test=20,
        synthetic_image_size=32,
        synthetic_channels=3,
        synthetic_classes=4,
    )
    ds = load_dataset(cfg)
    assert ds.train_x.shape == (60, 3, 32, 32) and ds.num_classes == 4 and len(ds.mean) == 3
    assert load_dataset(DataConfig(dataset="synthetic", normalization="half")).mean == (0.5,)


def test_nearest_centroid_is_far_above_chance() -> None:
    ds = load_dataset(CFG)
    x, xt = ds.train_x.reshape(1000, -1) / 255.0, ds.test_x.reshape(300, -1) / 255.0
    centroids = np.stack([x[ds.train_y == c].mean(axis=0) for c in range(10)])
    pred = np.argmin(((xt[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (pred == ds.test_y).mean() > 0.9


def test_logistic_regression_learns_it_in_a_few_steps() -> None:
    ds = load_dataset(CFG)
    tf = make_transform(ds, CFG)
    torch.manual_seed(0)
    model = torch.nn.Linear(28 * 28, 10)
    gen = torch.Generator().manual_seed(0)
    for step in range(60):
        idx = np.arange(step * 16, step * 16 + 16) % 1000
        loss = torch.nn.functional.cross_entropy(
            model(to_batch(ds.train_x, idx, tf, train=True, generator=gen).flatten(1)),
            torch.from_numpy(ds.train_y[idx]),
        )
        model.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain SGD step (torch.optim takes seconds to import)
            for p in model.parameters():
                p -= 0.05 * p.grad
    with torch.no_grad():
        logits = model(to_batch(ds.test_x, np.arange(300), tf, train=False).flatten(1))
    assert (logits.argmax(1).numpy() == ds.test_y).mean() > 0.6


def test_images_made_in_chunks_are_the_bytes_of_one_draw(monkeypatch):
    """The noise is drawn CHUNK samples at a time to bound memory; the stream, and so every byte, is that
    of a single draw (a chunk of 7 against one chunk of everything, with a remainder)."""
    from raysfl.data import synthetic
    from raysfl.data.config import DataConfig

    cfg = DataConfig(dataset="synthetic", synthetic_train=100, synthetic_test=30, synthetic_channels=3)
    monkeypatch.setattr(synthetic, "CHUNK", 7)
    small = synthetic.make_synthetic(cfg)
    monkeypatch.setattr(synthetic, "CHUNK", 10**6)
    whole = synthetic.make_synthetic(cfg)
    for name in ("train_x", "train_y", "test_x", "test_y"):
        assert np.array_equal(getattr(small, name), getattr(whole, name)), name
    assert small.mean == whole.mean and small.std == whole.std
