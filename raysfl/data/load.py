"""The single entry point that turns a :class:`DataConfig` into an :class:`ImageDataset`."""

from __future__ import annotations

import warnings
from pathlib import Path

from raysfl.data.config import DataConfig
from raysfl.data.dataset import ImageDataset
from raysfl.data.download import download
from raysfl.data.errors import DataError, DataNotFoundError
from raysfl.data.locate import Place, Source, describe_places, find_source, probe, search_places
from raysfl.data.registry import DATASETS, DatasetInfo
from raysfl.data.sources import matches_release, read_source
from raysfl.data.synthetic import make_synthetic


def _not_found(info: DatasetInfo, places_text: list[str], download_text: str) -> DataNotFoundError:
    lines = [
        f"{info.title} ({info.name}): no readable copy found. Looked in, in this order:",
        *places_text,
        f"Download: {download_text}",
        f"How to get it: {info.how_to_get}.",
        "Then point raysfl at the folder with data.data_dir (scenario), --data-dir, or $RAYSFL_DATA,"
        " or put it under ./data.",
    ]
    return DataNotFoundError("\n".join(lines))


def _download(info: DatasetInfo, target: Path) -> tuple[Source | None, str]:
    """Fetch ``info``'s files into ``target``: the copy found there, or None and what went wrong.

    Files fetched over plain HTTP (Fashion-MNIST's only server) can be altered on the way: a copy whose
    content is not the official release (its digest, :func:`matches_release`) is removed again, so it is
    neither used now nor found in ``./data`` next time.
    """
    fetched = [target / d.filename for d in info.downloads if not (target / d.filename).exists()]
    problems = download(info, target)
    if problems:
        return None, "; ".join(problems)
    source = probe(info, target)
    if source is None:
        return None, f"files fetched into {target} but not recognised"
    if matches_release(read_source(source, info), info, source) is False:
        for path in fetched:
            path.unlink(missing_ok=True)
        return None, (
            f"the files fetched into {target} are not the official {info.title} release (their content "
            f"differs from the release's digest: altered on the way, or another server's copy); they were "
            "removed"
        )
    return source, ""


def _title(info: DatasetInfo, source: Source) -> str:
    """The name to report results under; the CIFAR-10 JPEG copy is lossy (``shared/data/README.md``)."""
    if info.name == "cifar10" and source.kind.startswith("imagefolder"):
        return f"{info.title} (JPEG q75)"
    return info.title


def _locate(cfg: DataConfig, data_dir_override: str | None) -> tuple[DatasetInfo, list[Place], Source | None]:
    """The dataset's entry, the places searched for it, and the copy found there (``None``: none).

    Raises:
        DataNotFoundError: ``cfg.data_dir`` is set but names no directory, and no ``data_dir_override``
            replaces it.
    """
    if cfg.data_dir and not data_dir_override and not Path(cfg.data_dir).expanduser().is_dir():
        raise DataNotFoundError(
            f"data.data_dir: {cfg.data_dir} is not a directory; set it to the folder that holds the dataset, "
            "or to '' to search $RAYSFL_DATA, ./data and the system folders"
        )
    info = DATASETS[cfg.dataset]
    places = search_places(info, data_dir_override, cfg.data_dir)
    return info, places, find_source(info, places)


def _no_download(info: DatasetInfo, cfg: DataConfig) -> str | None:
    """Why no copy can be downloaded (``None``: one can be tried)."""
    if not info.downloads:
        return "none available for this dataset"
    if not cfg.download:
        return f"disabled (data.download = false); would fetch {info.downloads[0].urls[0]}"
    return None


def check_reachable(cfg: DataConfig, data_dir_override: str | None = None) -> None:
    """Raise what :func:`load_dataset` would for a dataset it can neither find nor download; read nothing.

    A copy found in a searched place, a download :func:`load_dataset` may try (``data.download`` and an
    official URL) and generated data pass; so a sweep can refuse unreachable data before it starts Ray.
    Whether a found copy is complete and sound is left to :func:`load_dataset`.

    Raises:
        DataError: an unknown dataset. DataNotFoundError: as :func:`load_dataset`.
    """
    if cfg.dataset not in DATASETS:
        raise DataError(f"unknown dataset {cfg.dataset!r}; known: {', '.join(DATASETS)}")
    if cfg.dataset == "synthetic":
        return
    info, places, source = _locate(cfg, data_dir_override)
    why = _no_download(info, cfg)
    if source is None and why is not None:
        raise _not_found(info, describe_places(info, places), why)


def load_dataset(cfg: DataConfig, data_dir_override: str | None = None) -> ImageDataset:
    """Locate, read, verify and return the dataset named by ``cfg.dataset``.

    Searches ``data_dir_override`` (``--data-dir``), ``cfg.data_dir``, ``$RAYSFL_DATA``, ``./data`` and
    the dataset's system folders, in that order (see :mod:`raysfl.data.locate`), then downloads into
    ``./data/<dataset>/`` if ``cfg.download`` and the dataset has an official URL. ``"synthetic"`` is
    generated in memory instead. The returned ``mean``/``std`` are those chosen by ``cfg.normalization``.

    Raises:
        DataNotFoundError: no copy anywhere; the message lists every searched place and how to get the data.
            Also when ``cfg.data_dir`` is set but names no directory and no ``data_dir_override`` replaces
            it: it would be passed over for the other places without a word (the CLI refuses such a
            ``--data-dir`` too).
        DataCorruptError: a copy was found but is truncated, malformed or has the wrong sample counts.
    """
    if cfg.dataset not in DATASETS:
        raise DataError(f"unknown dataset {cfg.dataset!r}; known: {', '.join(DATASETS)}")
    if cfg.dataset == "synthetic":
        return make_synthetic(cfg)
    info, places, source = _locate(cfg, data_dir_override)
    if source is None:
        places_text = describe_places(info, places)  # as they were before any download
        download_text = _no_download(info, cfg)
        if download_text is None:
            source, download_text = _download(info, Path.cwd() / "data" / info.name)
        if source is None:
            raise _not_found(info, places_text, download_text)
    raw = read_source(source, info)
    release = matches_release(raw, info, source)
    if release is False:
        warnings.warn(
            f"{source.path}: these are not the images and labels of the official {info.title} release "
            f"(another dataset, or a modified copy?); results on them are no {info.title} results",
            stacklevel=2,
        )
    mean, std = info.normalization(cfg.normalization)
    return ImageDataset(
        name=info.name,
        train_x=raw.train_x,
        train_y=raw.train_y,
        test_x=raw.test_x,
        test_y=raw.test_y,
        num_classes=info.num_classes,
        mean=mean,
        std=std,
        synthetic=False,
        source=str(source.path),
        train_writers=raw.train_writers,
        test_writers=raw.test_writers,
        writer_names=raw.writer_names,
        classes=raw.classes,
        title=_title(info, source),
        release=release,
    )
