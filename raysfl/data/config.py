"""Data section of a scenario: which dataset, where it lives, how it is split and transformed.

Tags follow ``shared/specs/README.md``: [P] stated in a paper, [C] what a reference code does, [A] an
implementation choice. Spec sections are cited as "GAS spec §10.11" (``specs/gas.md``) and "CSE-FSL spec §4.1"
(``specs/cse-fsl.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import option

DATASET_NAMES = (
    "fashion-mnist",
    "mnist",
    "cifar10",
    "cifar100",
    "cinic10",
    "tiny-imagenet",
    "femnist",
    "synthetic",
)


_DIRICHLET = {"partition": ("dirichlet",)}  # options only the Dirichlet split reads
_SYNTHETIC = {"dataset": ("synthetic",)}  # options only the synthetic dataset reads


@dataclass(frozen=True)
class DataConfig:
    """Options of :func:`raysfl.data.load_dataset`, :func:`raysfl.data.partition_dataset` and the transforms.

    Cross-field rule (checked in ``__post_init__``): ``partition = "natural"`` needs a dataset with writers
    (``femnist``).
    """

    dataset: str = option(
        "fashion-mnist",
        choices=DATASET_NAMES,
        doc="dataset [P] (GAS: cifar10, cinic10, fashion-mnist; CSE-FSL: cifar10, femnist; FedASMU: "
        "fashion-mnist, cifar10, cifar100, tiny-imagenet); or synthetic",
    )
    data_dir: str = option(
        "", doc="folder searched first; '' = search $RAYSFL_DATA, ./data, then system folders [A]"
    )
    partition: str = option(
        "shard",
        choices=("iid", "shard", "dirichlet", "natural", "contiguous", "iid-equal"),
        doc="client split: iid slices, label shards, Dirichlet label skew, natural = LEAF writers [P] GAS "
        "§8; contiguous / iid-equal = ⌊N/K⌋ samples each in file order / at random [C] CSE-FSL spec §2.7-8",
    )
    shards_per_client: int = option(
        2,
        ge=1,
        doc="shards per client; at most this many labels per client [P] GAS s=2 (s=4 CINIC)",
        applies={"partition": ("shard",)},
    )
    alpha: float = option(
        0.1,
        gt=0,
        doc="Dirichlet concentration, smaller = more skew [P] GAS α ∈ {0.1, 0.3}",
        applies=_DIRICHLET,
    )
    min_client_size: int = option(
        10,
        ge=1,
        doc="Dirichlet: redraw until every client holds this many samples (≥ 1: a client without data cannot "
        "train) [C] GAS min_require_size",
        applies=_DIRICHLET,
    )
    augment: str = option(
        "auto",
        choices=("auto", "none", "crop-flip"),
        doc="train augmentation; auto = the dataset's reference transforms [C] GAS spec §10.11",
    )
    color_jitter: str = option(
        "none",
        choices=("none", "cse-fsl"),
        doc="train jitter after crop and flip: cse-fsl = brightness ×U(0.5, 1.5) and contrast ×U(0.2, 1.8) "
        "in a random order per image, as the CSE-FSL code's ColorJitter [C] spec §4.1 (on [0, 1] floats, "
        "without its 8-bit rounding between the two [A]); the shipped scenarios leave it off",
    )
    normalization: str = option(
        "standard",
        choices=("standard", "gas-code", "half"),
        doc="mean/std: standard (shared/data README), gas-code [C] GAS §10.11, half = 0.5/0.5 [C] CSE-FSL",
    )
    crop_size: int = option(
        0,
        ge=0,
        doc="train random crop / test center crop size; 0 = image size [C] CSE-FSL uses 24 on CIFAR-10",
    )
    synthetic_train: int = option(
        2000,
        ge=1,
        le=1_000_000,
        doc="synthetic dataset: training samples [A]",
        applies=_SYNTHETIC,
    )
    synthetic_test: int = option(
        500,
        ge=1,
        le=1_000_000,
        doc="synthetic dataset: test samples [A]",
        applies=_SYNTHETIC,
    )
    synthetic_image_size: int = option(
        28,
        ge=4,
        doc="synthetic dataset: image height = width in pixels [A]",
        applies=_SYNTHETIC,
    )
    synthetic_channels: int = option(
        1, choices=(1, 3), doc="synthetic dataset: channels [A]", applies=_SYNTHETIC
    )
    synthetic_classes: int = option(
        10, ge=2, le=256, doc="synthetic dataset: number of classes [A]", applies=_SYNTHETIC
    )
    synthetic_noise: float = option(
        0.35,
        ge=0,
        doc="synthetic dataset: std of the Gaussian pixel noise on [0, 1] intensities [A]",
        applies=_SYNTHETIC,
    )
    synthetic_seed: int = option(
        0,
        ge=0,
        doc="synthetic dataset: seed of the class patterns and noise [A]",
        applies=_SYNTHETIC,
    )
    download: bool = option(True, doc="try the official download URL when no local copy is found [A]")

    def __post_init__(self) -> None:
        """Reject combinations that no loader can satisfy."""
        if self.partition == "natural" and self.dataset != "femnist":
            raise ValueError(
                f"partition: 'natural' (one client per writer) needs dataset 'femnist', got {self.dataset!r}"
            )
