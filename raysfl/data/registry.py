"""The literal registry of datasets: shapes, classes, normalization constants, on-disk layouts, downloads.

``DATASETS[name]`` is the single place that says what a dataset looks like and where it may be found;
:func:`raysfl.data.load_dataset` and a CLI ``list`` command read it, nothing else hard-codes these facts.

Normalization constants (on the [0, 1] scale):
- ``standard``: ``shared/data/README.md`` (Fashion-MNIST 0.2860/0.3530, MNIST 0.1307/0.3081, CIFAR-10
  (0.4914, 0.4822, 0.4465)/(0.2470, 0.2435, 0.2616)); CINIC-10 from the CINIC-10 authors' README; FEMNIST
  none (mean 0, std 1: LEAF's [0, 1] floats, as CSE-FSL's code, CSE-FSL spec §4.1).
- ``gas-code``: the GAS reference code's constants, GAS spec §10.11 (FMNIST 0.286/0.3205; CIFAR-10 and
  CINIC-10 (0.4914, 0.4822, 0.4465)/(0.2023, 0.1994, 0.2010)). The spec gives no MNIST or FEMNIST
  constants; those fall back to ``standard`` [A].
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.data.config import DATASET_NAMES

IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


@dataclass(frozen=True)
class Layout:
    """One on-disk form of a dataset: ``relpath`` (relative to a searched folder) read as format ``kind``.

    Kinds: ``idx`` (folder of the four IDX files, ``.gz`` or raw), ``cifar-python`` (folder of pickled
    batches), ``cifar-python-tar`` (the official ``.tar.gz`` of them), ``imagefolder`` (folder with
    ``train/`` and ``test/`` class folders), ``imagefolder-tar`` (the same inside a tar archive),
    ``leaf-json`` (folder with ``train/*.json`` and ``test/*.json``).
    """

    relpath: str
    kind: str


@dataclass(frozen=True)
class Download:
    """One file to fetch into ``./data/<dataset>/``: its name there and the URLs to try in order."""

    filename: str
    urls: tuple[str, ...]


@dataclass(frozen=True)
class DatasetInfo:
    """Metadata of one dataset; see the module docstring for the provenance of the constants.

    Attributes:
        name: Registry key, as in ``DataConfig.dataset``.
        title: Human-readable name for reports.
        channels: Image channels C.
        image_size: Image height = width.
        num_classes: Number of classes M.
        mean: ``standard`` per-channel mean on the [0, 1] scale.
        std: ``standard`` per-channel std on the [0, 1] scale.
        gas_mean: ``gas-code`` per-channel mean (GAS spec §10.11).
        gas_std: ``gas-code`` per-channel std (GAS spec §10.11).
        train_size: Expected number of training samples, None when it varies (LEAF, synthetic).
        test_size: Expected number of test samples, None when it varies.
        augment: What ``augment = "auto"`` means for this dataset: ``"crop-flip"`` or ``"none"``.
        folders: Dataset folder names tried under each searched root, before the root itself.
        layouts: On-disk forms tried, in order, in each of those folders.
        system_dirs: Folders searched after ``./data`` (distribution packages).
        downloads: Files fetched into ``./data/<name>/`` as the last resort.
        how_to_get: Instructions quoted by :class:`DataNotFoundError`.
        has_writers: Whether samples carry writer ids (``partition = "natural"``).
        release_digest: SHA-256 of the official release as read from an exact format (IDX): the train
            images, train labels, test images and test labels (:func:`raysfl.data.sources.content_digest`);
            ``""`` when there is none to compare with (lossy or varying copies).
    """

    name: str
    title: str
    channels: int
    image_size: int
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    gas_mean: tuple[float, ...]
    gas_std: tuple[float, ...]
    train_size: int | None
    test_size: int | None
    augment: str
    folders: tuple[str, ...] = ()
    layouts: tuple[Layout, ...] = ()
    system_dirs: tuple[str, ...] = ()
    downloads: tuple[Download, ...] = ()
    how_to_get: str = ""
    has_writers: bool = False
    release_digest: str = ""

    def normalization(self, kind: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``(mean, std)`` for ``DataConfig.normalization`` = ``standard``, ``gas-code`` or ``half``."""
        if kind == "standard":
            return self.mean, self.std
        if kind == "gas-code":
            return self.gas_mean, self.gas_std
        if kind == "half":
            return (0.5,) * self.channels, (0.5,) * self.channels
        raise ValueError(f"unknown normalization {kind!r}; choose standard, gas-code or half")


def _idx_downloads(*bases: str) -> tuple[Download, ...]:
    return tuple(Download(f"{stem}.gz", tuple(f"{b}{stem}.gz" for b in bases)) for stem in IDX_FILES)


_IDX_LAYOUTS = (Layout(".", "idx"), Layout("raw", "idx"))
_IDX_HELP = (
    "<root>/{folder}/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz], or those files directly in <root>"
)
_CIFAR_MEAN, _CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
_GAS_CIFAR_STD = (0.2023, 0.1994, 0.2010)

DATASETS: dict[str, DatasetInfo] = {
    "fashion-mnist": DatasetInfo(
        name="fashion-mnist",
        title="Fashion-MNIST",
        channels=1,
        image_size=28,
        num_classes=10,
        mean=(0.2860,),
        std=(0.3530,),
        gas_mean=(0.286,),
        gas_std=(0.3205,),
        train_size=60000,
        test_size=10000,
        augment="none",
        folders=("fashion-mnist", "FashionMNIST", "fashion_mnist"),
        layouts=_IDX_LAYOUTS,
        system_dirs=("/usr/share/datasets/fashion-mnist",),
        downloads=_idx_downloads("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"),
        how_to_get="Debian/Ubuntu: `apt-get install dataset-fashion-mnist` (files land in"
        " /usr/share/datasets/fashion-mnist/); or download the four files from"
        " http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/. Layout: "
        + _IDX_HELP.format(folder="fashion-mnist"),
        release_digest="ece172613115fb18b120bec8f6c02271af90b8b8f0a5af5c51cbd5ceed68e619",
    ),
    "mnist": DatasetInfo(
        name="mnist",
        title="MNIST",
        channels=1,
        image_size=28,
        num_classes=10,
        mean=(0.1307,),
        std=(0.3081,),
        gas_mean=(0.1307,),
        gas_std=(0.3081,),
        train_size=60000,
        test_size=10000,
        augment="none",
        folders=("mnist", "MNIST"),
        layouts=_IDX_LAYOUTS,
        downloads=_idx_downloads(
            "https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"
        ),
        how_to_get="download the four files from https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of"
        " http://yann.lecun.com/exdb/mnist/). Layout: " + _IDX_HELP.format(folder="mnist"),
        release_digest="1e35582d42a90940c55b956deb61875c020b567ed20e3c5b174f52bf7809ed9b",
    ),
    "cifar10": DatasetInfo(
        name="cifar10",
        title="CIFAR-10",
        channels=3,
        image_size=32,
        num_classes=10,
        mean=_CIFAR_MEAN,
        std=_CIFAR_STD,
        gas_mean=_CIFAR_MEAN,
        gas_std=_GAS_CIFAR_STD,
        train_size=50000,
        test_size=10000,
        augment="crop-flip",
        folders=("cifar10", "cifar-10", "CIFAR10"),
        layouts=(
            Layout("cifar-10-batches-py", "cifar-python"),
            Layout(".", "cifar-python"),
            Layout("cifar-10-python.tar.gz", "cifar-python-tar"),
            Layout("CIFAR10-jpg", "imagefolder"),
            Layout("cifar10-jpg.tar.gz", "imagefolder-tar"),
            Layout(".", "imagefolder"),
        ),
        downloads=(
            Download("cifar-10-python.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",)),
        ),
        how_to_get="download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz (read as is, no need to"
        " extract). Layouts: <root>/cifar-10-batches-py/{data_batch_1..5,test_batch},"
        " <root>/cifar-10-python.tar.gz, or the JPEG copy <root>/CIFAR10-jpg/{train,test}/<class>/*.jpg"
        " or <root>/cifar10-jpg.tar.gz",
    ),
    "cifar100": DatasetInfo(
        name="cifar100",
        title="CIFAR-100",
        channels=3,
        image_size=32,
        num_classes=100,
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
        gas_mean=(0.5071, 0.4865, 0.4409),
        gas_std=(0.2673, 0.2564, 0.2762),
        train_size=50000,
        test_size=10000,
        augment="crop-flip",
        folders=("cifar100", "cifar-100", "CIFAR100", "CIFAR100-jpg"),
        layouts=(Layout(".", "imagefolder"), Layout("cifar100-jpg.tar.gz", "imagefolder-tar")),
        how_to_get="export CIFAR-100 as images by fine label: <root>/CIFAR100-jpg/{train,test}/<class>/*.jpg"
        " (or the same tree in <root>/cifar100/cifar100-jpg.tar.gz); the pickled python version is not"
        " read yet",
    ),
    "cinic10": DatasetInfo(
        name="cinic10",
        title="CINIC-10",
        channels=3,
        image_size=32,
        num_classes=10,
        mean=(0.47889522, 0.47227842, 0.43047404),
        std=(0.24205776, 0.23828046, 0.25874835),
        gas_mean=_CIFAR_MEAN,
        gas_std=_GAS_CIFAR_STD,
        train_size=90000,
        test_size=90000,
        augment="crop-flip",
        folders=("CINIC-10", "cinic-10", "cinic10"),
        layouts=(Layout(".", "imagefolder"), Layout("CINIC-10.tar.gz", "imagefolder-tar")),
        downloads=(
            Download(
                "CINIC-10.tar.gz", ("https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz",)
            ),
        ),
        how_to_get="download https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz"
        " (read as is or extracted). Layout: <root>/CINIC-10/{train,valid,test}/<class>/*.png"
        " (valid is not used, as in GAS's code, GAS spec §10.11)",
    ),
    "tiny-imagenet": DatasetInfo(
        name="tiny-imagenet",
        title="Tiny-ImageNet-200",
        channels=3,
        image_size=64,
        num_classes=200,
        mean=(0.4802, 0.4481, 0.3975),
        std=(0.2770, 0.2691, 0.2821),
        gas_mean=(0.4802, 0.4481, 0.3975),
        gas_std=(0.2770, 0.2691, 0.2821),
        train_size=100000,
        test_size=10000,
        augment="crop-flip",
        folders=("tiny-imagenet", "tiny-imagenet-200", "TinyImageNet"),
        layouts=(Layout(".", "imagefolder"), Layout("tiny-imagenet.tar.gz", "imagefolder-tar")),
        how_to_get="download http://cs231n.stanford.edu/tiny-imagenet-200.zip and arrange it as"
        " <root>/tiny-imagenet/{train,test}/<wnid>/*.JPEG: train/<wnid>/images/* go to train/<wnid>/, and"
        " val/images/* go to test/<wnid>/ by val/val_annotations.txt (the official layout is not read as is)",
    ),
    "femnist": DatasetInfo(
        name="femnist",
        title="FEMNIST (LEAF)",
        channels=1,
        image_size=28,
        num_classes=62,
        mean=(0.0,),
        std=(1.0,),
        gas_mean=(0.0,),
        gas_std=(1.0,),
        train_size=None,
        test_size=None,
        augment="none",
        folders=("femnist", "leaf/data/femnist/data", "FEMNIST"),
        layouts=(Layout(".", "leaf-json"), Layout("data", "leaf-json")),
        has_writers=True,
        how_to_get="generate it with LEAF (https://github.com/TalwalkarLab/leaf, data/femnist/preprocess.sh);"
        " no automatic download. Layout: <root>/femnist/{train,test}/*.json or <root>/leaf/data/femnist/data/"
        "{train,test}/*.json",
    ),
    "synthetic": DatasetInfo(
        name="synthetic",
        title="synthetic class patterns (tests only)",
        channels=1,
        image_size=28,
        num_classes=10,
        mean=(0.5,),
        std=(0.25,),
        gas_mean=(0.5,),
        gas_std=(0.25,),
        train_size=None,
        test_size=None,
        augment="none",
        how_to_get="generated in memory from data.synthetic_* options",
    ),
}

if tuple(DATASETS) != DATASET_NAMES:
    raise RuntimeError("invariant broken: DATASETS and DataConfig.dataset choices must list the same names")
