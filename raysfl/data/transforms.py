"""Per-sample image augmentation and normalization in torch, deterministic given a ``torch.Generator``.

Reference pipelines (GAS spec §10.11, CSE-FSL spec §4.1):
- GAS, CIFAR-10 and CINIC-10 train: ``RandomCrop(32, padding=4)`` on the uint8 image (zero padding, before
  normalization, as torchvision pads the PIL image) → ``ToTensor`` → ``Normalize`` → ``RandomHorizontalFlip``.
  Flipping commutes with per-channel normalization, so flipping before normalizing is the same map.
- GAS, Fashion-MNIST: ``Normalize`` only.
- CSE-FSL, CIFAR-10 train: ``RandomCrop(24)`` (no padding) → flip → [``ColorJitter(brightness=0.5,
  contrast=(0.2, 1.8))`` with ``data.color_jitter = "cse-fsl"``] → normalize with 0.5/0.5; test:
  ``CenterCrop(24)`` → normalize. The jitter (:func:`brightness_contrast_jitter`) works on [0, 1] floats,
  without the 8-bit rounding the code's PIL images get after each of its two steps [A].

:func:`make_transform` picks the pipeline from ``DataConfig.augment``, ``crop_size`` and ``color_jitter``;
:func:`to_batch` turns indices into a uint8 dataset into a normalized float32 batch. Random draws happen in a
fixed order per batch (crop offsets, then flip coins, then the jitter's factors), all from the generator
passed in, so a seeded generator gives identical batches on every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from raysfl.data.config import DataConfig
from raysfl.data.dataset import ImageDataset
from raysfl.data.registry import DATASETS


def pad_random_crop(x: torch.Tensor, size: int, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Zero-pad ``x`` (``(B, C, H, W)``) by ``padding`` pixels a side, then randomly crop ``size`` squares.

    Offsets are uniform over every valid position, independently per sample, as torchvision's
    ``RandomCrop(size, padding)``; ``padding = 0`` is the plain random crop CSE-FSL uses.
    """
    if padding:
        x = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    b, _, h, w = x.shape
    if size > h or size > w:
        raise ValueError(f"crop size {size} exceeds the padded image {h}x{w}")
    top = torch.randint(0, h - size + 1, (b,), generator=generator)
    left = torch.randint(0, w - size + 1, (b,), generator=generator)
    offs = torch.arange(size)
    rows = (top[:, None] + offs)[:, :, None]  # (B, size, 1)
    cols = (left[:, None] + offs)[:, None, :]  # (B, 1, size)
    batch = torch.arange(b)[:, None, None]
    return (
        x[batch, :, rows, cols].permute(0, 3, 1, 2).contiguous()
    )  # (B, size, size, C) -> (B, C, size, size)


def center_crop(x: torch.Tensor, size: int) -> torch.Tensor:
    """Crop the central ``size`` x ``size`` window, rounding offsets as torchvision's ``CenterCrop``."""
    h, w = x.shape[-2:]
    if size > h or size > w:
        raise ValueError(f"crop size {size} exceeds the image {h}x{w}")
    top, left = round((h - size) / 2.0), round((w - size) / 2.0)
    return x[..., top : top + size, left : left + size]


def random_hflip(x: torch.Tensor, generator: torch.Generator, p: float = 0.5) -> torch.Tensor:
    """Mirror each sample left-right with probability ``p`` (one coin per sample)."""
    flip = torch.rand(x.shape[0], generator=generator) < p
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


GRAY_WEIGHTS = (0.299, 0.587, 0.114)
"""ITU-R 601-2 luma weights: the grey level PIL's and torchvision's contrast adjustment blends towards."""


def brightness_contrast_jitter(
    x: torch.Tensor,
    generator: torch.Generator,
    brightness: tuple[float, float] = (0.5, 1.5),
    contrast: tuple[float, float] = (0.2, 1.8),
) -> torch.Tensor:
    """Colour jitter of brightness and contrast on a uint8 ``(B, C, H, W)`` batch; float32 in [0, 1] out.

    Per image, as torchvision's ``ColorJitter(brightness=0.5, contrast=(0.2, 1.8))`` (CSE-FSL spec §4.1
    [C]): factors b ~ U(brightness) and c ~ U(contrast), applied in an order drawn per image (a fair coin:
    brightness first or contrast first), each followed by clipping to [0, 1]:

        brightness  x ← clip(b·x)
        contrast    x ← clip(c·x + (1 − c)·ḡ),  ḡ the mean grey level of the image at that point
                    (weights :data:`GRAY_WEIGHTS`; a one-channel image is its own grey)

    Draws, in order: B brightness factors, B contrast factors, B order coins.
    """
    n = x.shape[0]
    b = brightness[0] + (brightness[1] - brightness[0]) * torch.rand(n, generator=generator)
    c = contrast[0] + (contrast[1] - contrast[0]) * torch.rand(n, generator=generator)
    brightness_first = torch.rand(n, generator=generator) < 0.5
    b, c = b[:, None, None, None], c[:, None, None, None]
    x = x.to(torch.float32) / 255.0

    def adjust_brightness(y: torch.Tensor) -> torch.Tensor:
        return (b * y).clamp(0.0, 1.0)

    def adjust_contrast(y: torch.Tensor) -> torch.Tensor:
        if y.shape[1] == 3:
            w = torch.tensor(GRAY_WEIGHTS, dtype=y.dtype)[None, :, None, None]
            grey = (y * w).sum(1, keepdim=True)
        else:
            grey = y.mean(1, keepdim=True)
        level = grey.mean(dim=(1, 2, 3), keepdim=True)
        return (c * y + (1.0 - c) * level).clamp(0.0, 1.0)

    one = adjust_contrast(adjust_brightness(x))
    other = adjust_brightness(adjust_contrast(x))
    return torch.where(brightness_first[:, None, None, None], one, other)


def normalize(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """uint8 ``[0, 255]`` → float32 ``(x / 255 - mean) / std`` per channel (``ToTensor`` + ``Normalize``).

    A float batch is taken as already on the [0, 1] scale (the jitter's output).
    """
    m = torch.tensor(mean, dtype=torch.float32)[:, None, None]
    s = torch.tensor(std, dtype=torch.float32)[:, None, None]
    unit = x if x.is_floating_point() else x.to(torch.float32) / 255.0
    return (unit - m) / s


def row_major(x: torch.Tensor) -> torch.Tensor:
    """``x`` with the standard row-major strides of its shape: ``x`` itself when it has them, else a copy.

    A tensor can be contiguous under several stride tuples when a dimension has size 1: a one-channel
    batch gathered from ``images[:, None]`` (stride 0 on the channel axis) has strides
    ``(HW, 1, W, 1)``, which torch also reads as ``channels_last``, so convolutions on it run oneDNN's
    channels-last kernels (and return channels-last activations) whose results differ in the last bits
    from those of the standard layout ``(HW, HW, W, 1)``. The same array pickled into Ray's object store
    comes back with standard strides, so without this a local run and a Ray run of the same scenario
    differed. Every batch therefore leaves the pipeline in the standard layout, whatever the strides of
    the images it came from.
    """
    expected, step = [], 1
    for size in reversed(x.shape):
        expected.append(step)
        step *= max(size, 1)
    if x.stride() == tuple(reversed(expected)):
        return x
    return x.clone(memory_format=torch.contiguous_format)


@dataclass(frozen=True)
class Transform:
    """A train and a test pipeline on uint8 batches.

    Attributes:
        mean: Per-channel mean on the [0, 1] scale.
        std: Per-channel std on the [0, 1] scale.
        image_size: Input height = width.
        crop_size: Output height = width (``<= image_size``).
        padding: Zero padding before the train random crop; 0 with ``crop_size < image_size`` is a plain
            random crop, 0 with ``crop_size == image_size`` no crop at all.
        random_crop: Whether training crops at a random position (else centrally, as the test pipeline).
        flip: Whether training mirrors with probability 0.5.
        color_jitter: Whether training jitters brightness and contrast after the flip
            (:func:`brightness_contrast_jitter`).
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    image_size: int
    crop_size: int
    padding: int = 0
    random_crop: bool = False
    flip: bool = False
    color_jitter: bool = False

    def train(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Augment and normalize a uint8 ``(B, C, H, W)`` batch; draws crop offsets, flip coins, jitter.

        The result has the standard layout (:func:`row_major`), whatever the strides of ``x``.
        """
        if self.random_crop:
            x = pad_random_crop(x, self.crop_size, self.padding, generator)
        elif self.crop_size != self.image_size:
            x = center_crop(x, self.crop_size)
        if self.flip:
            x = random_hflip(x, generator)
        if self.color_jitter:
            x = brightness_contrast_jitter(x, generator)
        return row_major(normalize(x, self.mean, self.std))

    def test(self, x: torch.Tensor) -> torch.Tensor:
        """Center-crop (when ``crop_size < image_size``) and normalize; draws nothing; standard layout."""
        if self.crop_size != self.image_size:
            x = center_crop(x, self.crop_size)
        return row_major(normalize(x, self.mean, self.std))


def make_transform(dataset: ImageDataset, cfg: DataConfig) -> Transform:
    """The :class:`Transform` for ``dataset`` under ``cfg.augment`` and ``cfg.crop_size``.

    ``augment = "auto"`` uses the dataset's reference augmentation (``DATASETS[name].augment``: crop-flip for
    CIFAR-10 and CINIC-10, none otherwise, GAS spec §10.11). ``"crop-flip"`` is a random crop plus flip:
    with padding 4 at full size (GAS), without padding when ``crop_size`` is smaller (CSE-FSL). The mean/std
    come from ``dataset`` (already chosen by ``cfg.normalization``).

    Raises:
        ValueError: ``crop_size`` larger than the images.
    """
    size = dataset.image_size
    crop = cfg.crop_size or size
    if crop > size:
        raise ValueError(f"data.crop_size={cfg.crop_size} exceeds the {size}x{size} images of {dataset.name}")
    info = DATASETS.get(dataset.name)
    mode = cfg.augment if cfg.augment != "auto" else (info.augment if info else "none")
    crop_flip = mode == "crop-flip"
    return Transform(
        mean=dataset.mean,
        std=dataset.std,
        image_size=size,
        crop_size=crop,
        padding=4 if crop_flip and crop == size else 0,
        random_crop=crop_flip,
        flip=crop_flip,
        color_jitter=cfg.color_jitter == "cse-fsl",
    )


def to_batch(
    images: np.ndarray | torch.Tensor,
    indices: np.ndarray | torch.Tensor,
    transform: Transform,
    *,
    train: bool,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Gather ``images[indices]`` (uint8 ``(N, C, H, W)``) and return a normalized float32 batch on CPU.

    Args:
        images: The uint8 image array of a split (e.g. ``ImageDataset.train_x``); it is not modified.
        indices: Sample indices of the batch, in batch order.
        transform: Pipeline from :func:`make_transform`.
        train: Apply the train augmentation (needs ``generator``) or the deterministic test transform.
        generator: Source of every random draw of the train pipeline.

    Raises:
        ValueError: ``train=True`` without a generator, or images that are not uint8.
    """
    if images.dtype is not torch.uint8 and images.dtype != np.dtype(np.uint8):
        raise ValueError(f"to_batch expects uint8 images, got {images.dtype}")
    idx = torch.as_tensor(np.asarray(indices, dtype=np.int64))
    x = images[idx] if isinstance(images, torch.Tensor) else torch.from_numpy(images[idx.numpy()])
    if not train:
        return transform.test(x)
    if generator is None:
        raise ValueError(
            "to_batch(train=True) needs an explicit torch.Generator for reproducible augmentation"
        )
    return transform.train(x, generator)
