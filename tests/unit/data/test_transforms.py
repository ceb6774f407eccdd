"""Tensor augmentation: determinism, crops and zero padding, flips, normalization, per-dataset defaults."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import torch

from raysfl.algorithms.common.transforms import train_transform
from raysfl.data import DataConfig, ImageDataset, Transform, make_transform, to_batch
from raysfl.data.transforms import center_crop, pad_random_crop, random_hflip


def _dataset(name: str = "cifar10", channels: int = 3, size: int = 32, n: int = 16) -> ImageDataset:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n, channels, size, size), dtype=np.uint8)
    y = np.arange(n, dtype=np.int64) % 10
    return ImageDataset(name, x, y, x[:4], y[:4], 10, (0.5,) * channels, (0.25,) * channels, False, "test")


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_same_generator_seed_same_batch_and_different_seed_differs() -> None:
    ds = _dataset()
    tf = make_transform(ds, DataConfig(dataset="cifar10"))
    idx = np.arange(16)
    a = to_batch(ds.train_x, idx, tf, train=True, generator=_gen(3))
    b = to_batch(ds.train_x, idx, tf, train=True, generator=_gen(3))
    c = to_batch(ds.train_x, idx, tf, train=True, generator=_gen(4))
    assert a.dtype == torch.float32 and a.shape == (16, 3, 32, 32)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_pad_crop_shape_and_content_is_a_window_of_the_zero_padded_image() -> None:
    x = torch.from_numpy(_dataset(n=64).train_x)
    out = pad_random_crop(x, 32, 4, _gen())
    assert out.shape == (64, 3, 32, 32) and out.dtype == torch.uint8
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    offsets = set()
    for i in range(64):
        hits = [
            (top, left)
            for top in range(9)
            for left in range(9)
            if torch.equal(padded[i, :, top : top + 32, left : left + 32], out[i])
        ]
        assert hits, f"sample {i} is not a window of its padded image"
        offsets.add(hits[0])
    assert len(offsets) > 10, "offsets should vary between samples"
    assert out.eq(0).any(), "some crops must show the zero padding"


def test_plain_random_crop_and_center_crop() -> None:
    x = torch.arange(2 * 1 * 32 * 32, dtype=torch.int32).reshape(2, 1, 32, 32).to(torch.uint8)
    out = pad_random_crop(x, 24, 0, _gen())
    assert out.shape == (2, 1, 24, 24)
    centre = center_crop(x, 24)
    assert torch.equal(centre, x[..., 4:28, 4:28])
    assert torch.equal(center_crop(torch.zeros(1, 1, 5, 5), 2), torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match="exceeds"):
        pad_random_crop(x, 33, 0, _gen())


def test_flip_mirrors_exactly_the_chosen_samples() -> None:
    x = torch.from_numpy(_dataset(n=200).train_x)
    out = random_hflip(x, _gen(1))
    flipped = [bool(torch.equal(out[i], x[i].flip(-1))) for i in range(200)]
    kept = [bool(torch.equal(out[i], x[i])) for i in range(200)]
    assert all(f != k for f, k in zip(flipped, kept, strict=True))
    assert 70 < sum(flipped) < 130
    coins = torch.rand(200, generator=_gen(1)) < 0.5
    assert flipped == coins.tolist()


def test_normalization_values() -> None:
    ds = _dataset(channels=1, size=4, n=2)
    tf = Transform(mean=(0.5,), std=(0.25,), image_size=4, crop_size=4)
    out = to_batch(ds.train_x, [1], tf, train=False)
    expected = (ds.train_x[1:2].astype(np.float32) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_padding_is_zero_before_normalization() -> None:
    x = np.full((64, 3, 8, 8), 255, dtype=np.uint8)
    tf = Transform(mean=(0.5,) * 3, std=(0.25,) * 3, image_size=8, crop_size=8, padding=4, random_crop=True)
    out = to_batch(x, np.arange(64), tf, train=True, generator=_gen())
    assert set(torch.unique(out).tolist()) == {-2.0, 2.0}


def test_defaults_per_dataset() -> None:
    cifar = make_transform(_dataset("cifar10"), DataConfig(dataset="cifar10"))
    assert (cifar.random_crop, cifar.padding, cifar.flip, cifar.crop_size) == (True, 4, True, 32)
    cinic = make_transform(_dataset("cinic10"), DataConfig(dataset="cinic10"))
    assert (cinic.random_crop, cinic.padding, cinic.flip) == (True, 4, True)
    fmnist = make_transform(_dataset("fashion-mnist", 1, 28), DataConfig())
    assert (fmnist.random_crop, fmnist.flip, fmnist.crop_size) == (False, False, 28)
    none = make_transform(_dataset("cifar10"), DataConfig(dataset="cifar10", augment="none"))
    assert not none.random_crop and not none.flip
    forced = make_transform(_dataset("fashion-mnist", 1, 28), DataConfig(augment="crop-flip"))
    assert forced.random_crop and forced.padding == 4


def test_cse_fsl_24_pixel_crops() -> None:
    ds = _dataset()
    cfg = DataConfig(dataset="cifar10", crop_size=24)  # the constants come from the dataset (0.5, 0.25)
    tf = make_transform(ds, cfg)
    assert (tf.random_crop, tf.padding, tf.flip, tf.crop_size) == (True, 0, True, 24)
    train = to_batch(ds.train_x, np.arange(4), tf, train=True, generator=_gen())
    test = to_batch(ds.test_x, np.arange(4), tf, train=False)
    assert train.shape == test.shape == (4, 3, 24, 24)
    expected = (ds.test_x[:, :, 4:28, 4:28].astype(np.float32) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(test.numpy(), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="data.crop_size=40"):
        make_transform(ds, dataclasses.replace(cfg, crop_size=40))


def test_test_transform_draws_nothing_and_train_needs_a_generator() -> None:
    ds = _dataset()
    tf = make_transform(ds, DataConfig(dataset="cifar10"))
    state = torch.random.get_rng_state()
    a = to_batch(ds.test_x, np.arange(4), tf, train=False)
    assert torch.equal(a, to_batch(torch.from_numpy(ds.test_x), torch.arange(4), tf, train=False))
    assert torch.equal(state, torch.random.get_rng_state())
    with pytest.raises(ValueError, match="torch.Generator"):
        to_batch(ds.train_x, np.arange(4), tf, train=True)
    with pytest.raises(ValueError, match="uint8"):
        to_batch(ds.train_x.astype(np.float32), np.arange(4), tf, train=False)


@pytest.mark.parametrize("augment", ["none", "crop-flip"])
def test_batches_leave_in_the_standard_layout_whatever_the_image_strides(augment: str) -> None:
    """Determinism across backends: a one-channel ``images[:, None]`` (channel stride 0, as the IDX reader
    once returned) and its copy deserialised from Ray's object store (pickle 5, standard strides) must give
    the same batch layout, or convolutions take channels-last kernels on one side only and the local and
    Ray backends differ in the last bits."""
    rng = np.random.default_rng(1)
    flat = rng.integers(0, 256, (64, 28, 28), dtype=np.uint8)
    stride0 = flat[:, None]
    shipped = pickle.loads(pickle.dumps(stride0, protocol=5))  # what a Ray actor receives
    assert stride0.strides[1] == 0 and shipped.strides == (784, 784, 28, 1)
    crop_flip = augment == "crop-flip"
    tf = Transform(
        (0.3,), (0.3,), 28, 28, padding=4 if crop_flip else 0, random_crop=crop_flip, flip=crop_flip
    )
    conv = torch.nn.Conv2d(1, 32, 3, padding=1)
    idx = np.arange(0, 64, 2)
    outs = []
    for images in (stride0, shipped):
        train = train_transform(tf)(images[idx], _gen(5))
        test = to_batch(images, idx, tf, train=False)
        for x in (train, test):
            assert x.stride() == (784, 784, 28, 1)
        with torch.no_grad():
            outs.append((train, test, conv(train), conv(test)))
    for a, b in zip(*outs, strict=True):
        assert a.stride() == b.stride() and torch.equal(a, b)


def test_brightness_and_contrast_jitter_by_hand() -> None:
    """CSE-FSL's ColorJitter(0.5, (0.2, 1.8)): per image b ~ U(0.5, 1.5), c ~ U(0.2, 1.8), random order."""
    from raysfl.data.transforms import GRAY_WEIGHTS, brightness_contrast_jitter

    x = torch.from_numpy(np.random.default_rng(1).integers(0, 256, (6, 3, 5, 5), dtype=np.uint8))
    out = brightness_contrast_jitter(x, _gen(4))
    draws = _gen(4)
    b = 0.5 + torch.rand(6, generator=draws)
    c = 0.2 + 1.6 * torch.rand(6, generator=draws)
    first = torch.rand(6, generator=draws) < 0.5
    for i in range(6):
        img = x[i].double() / 255

        def bright(y, i=i):
            return (b[i].double() * y).clamp(0, 1)

        def contrast(y, i=i):
            grey = sum(w * y[ch] for ch, w in enumerate(GRAY_WEIGHTS)).mean()
            return (c[i].double() * y + (1 - c[i].double()) * grey).clamp(0, 1)

        want = contrast(bright(img)) if first[i] else bright(contrast(img))
        torch.testing.assert_close(out[i].double(), want, rtol=0, atol=1e-6)
    assert out.dtype == torch.float32 and out.min() >= 0 and out.max() <= 1
    assert first.any() and not first.all()  # both orders occur in this draw


def test_color_jitter_option_follows_the_flip_and_is_off_by_default() -> None:
    ds = _dataset()
    cfg = DataConfig(dataset="cifar10", crop_size=24)  # the constants come from the dataset (0.5, 0.25)
    plain, jitter = (
        make_transform(ds, cfg),
        make_transform(ds, dataclasses.replace(cfg, color_jitter="cse-fsl")),
    )
    assert not plain.color_jitter and jitter.color_jitter
    a = to_batch(ds.train_x, np.arange(8), plain, train=True, generator=_gen(2))
    j = to_batch(ds.train_x, np.arange(8), jitter, train=True, generator=_gen(2))
    again = to_batch(ds.train_x, np.arange(8), jitter, train=True, generator=_gen(2))
    assert torch.equal(j, again) and not torch.equal(a, j)
    # the same crops and flips as without jitter: the jitter draws after them
    from raysfl.data.transforms import brightness_contrast_jitter, normalize

    g = _gen(2)
    x = pad_random_crop(torch.from_numpy(ds.train_x[:8]), 24, 0, g)
    x = random_hflip(x, g)
    torch.testing.assert_close(j, normalize(brightness_contrast_jitter(x, g), jitter.mean, jitter.std))
    # the test pipeline never jitters
    assert torch.equal(
        to_batch(ds.test_x, np.arange(4), plain, train=False),
        to_batch(ds.test_x, np.arange(4), jitter, train=False),
    )
