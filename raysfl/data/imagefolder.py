"""ImageFolder trees of JPEG/PNG files, from a folder or straight from a ``.tar``/``.tar.gz`` archive.

Layout: ``<root>/<split>/<class>/<file>`` (files may sit in deeper sub-folders of a class). As in
torchvision's ``ImageFolder``, labels are the positions of the class folder names in sorted order and the
samples of a class are ordered by relative path; every split must have the same class folders. Used for the
CIFAR-10 JPEG copy (``CIFAR10-jpg/{train,test}``) and CINIC-10 (``train/ valid/ test/``). Decoding uses
Pillow only; no torchvision.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath

import numpy as np
from PIL import Image

from raysfl.data.errors import DataCorruptError
from raysfl.data.walk import files_below

MAX_IMAGE_BYTES = 64 << 20
"""The largest image an archive member may be: a larger one is refused before it is read into memory."""
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".gif", ".webp", ".tif", ".tiff")

Splits = dict[str, tuple[np.ndarray, np.ndarray]]


def decode_image(data: bytes, where: str, channels: int, size: int | None) -> np.ndarray:
    """Decode one image file to uint8 ``(C, H, W)``, converting to RGB (3 channels) or grey (1 channel).

    Raises:
        DataCorruptError: undecodable data, or a size other than ``size`` x ``size`` when ``size`` is given.
    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            arr = np.asarray(img.convert("RGB" if channels == 3 else "L"), dtype=np.uint8)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise DataCorruptError(f"{where}: cannot decode image: {err}") from err
    if size is not None and arr.shape[:2] != (size, size):
        raise DataCorruptError(f"{where}: image is {arr.shape[1]}x{arr.shape[0]}, expected {size}x{size}")
    return arr[None] if arr.ndim == 2 else np.ascontiguousarray(arr.transpose(2, 0, 1))


def _is_image(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return not base.startswith(".") and base.lower().endswith(IMAGE_SUFFIXES)


def _assemble(
    entries: dict[str, list[tuple[str, str, bytes | Path]]],
    splits: Sequence[str],
    where: str,
    channels: int,
    size: int | None,
) -> tuple[Splits, tuple[str, ...]]:
    """Sort ``(class, relpath, payload)`` entries per split, check the class sets, decode, stack."""
    class_sets = {s: sorted({cls for cls, _, _ in entries.get(s, [])}) for s in splits}
    classes = class_sets[splits[0]]
    for split in splits:
        if not entries.get(split):
            raise DataCorruptError(f"{where}: no images under split folder '{split}/'")
        if class_sets[split] != classes:
            raise DataCorruptError(
                f"{where}: class folders differ between '{splits[0]}/' {classes}"
                f" and '{split}/' {class_sets[split]}"
            )
    label_of = {cls: i for i, cls in enumerate(classes)}
    out: Splits = {}
    for split in splits:
        items = sorted(entries[split], key=lambda e: (label_of[e[0]], e[1]))
        images = []
        for cls, rel, payload in items:
            name = f"{where}{split}/{cls}/{rel}"
            data = payload.read_bytes() if isinstance(payload, Path) else payload
            img = decode_image(data, name, channels, size)
            if size is None:  # the first image fixes the size of all others
                if img.shape[1] != img.shape[2]:
                    raise DataCorruptError(f"{name}: image is not square ({img.shape[2]}x{img.shape[1]})")
                size = img.shape[1]
            images.append(img)
        y = np.fromiter((label_of[cls] for cls, _, _ in items), dtype=np.int64, count=len(items))
        out[split] = (np.ascontiguousarray(np.stack(images)), y)
    return out, tuple(classes)


def read_image_folder(
    root: str | Path, splits: Sequence[str] = ("train", "test"), channels: int = 3, size: int | None = None
) -> tuple[Splits, tuple[str, ...]]:
    """Read ``root/<split>/<class>/**/<image>`` for each split.

    Args:
        root: Folder holding one sub-folder per split.
        splits: Split folder names to read; other folders (e.g. CINIC-10's ``valid``) are ignored.
        channels: 3 (RGB) or 1 (grey).
        size: Required height = width, or None to take it from the first image (all must agree).

    Returns:
        ``({split: (x uint8 (N, C, H, W), y int64 (N,))}, class_names_in_label_order)``.
    """
    root = Path(root)
    entries: dict[str, list[tuple[str, str, bytes | Path]]] = {}
    for split in splits:
        split_dir = root / split
        if not split_dir.is_dir():
            raise DataCorruptError(f"{root}: missing split folder '{split}/'")
        found: list[tuple[str, str, bytes | Path]] = []
        for class_dir in sorted(p for p in split_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for path in _image_files(class_dir, (root, split_dir)):
                found.append((class_dir.name, path.relative_to(class_dir).as_posix(), path))
        entries[split] = found
    return _assemble(entries, splits, f"{root}/", channels, size)


def _image_files(class_dir: Path, inside: tuple[Path, ...]) -> Iterator[Path]:
    """The image files below ``class_dir``: :func:`raysfl.data.walk.files_below`, linked folders followed.

    ``inside``: the tree's root and split folder, as the cache's walk from the root sees them.

    Raises:
        DataCorruptError: an image name that is a link to nothing (the image would be missing silently).
    """
    for path in files_below(class_dir, inside):
        if not _is_image(path.name):
            continue
        if not path.exists():
            raise DataCorruptError(f"{path}: a link to a missing file ({os.readlink(path)})")
        yield path


def _tar_entries(
    members: Iterable[tuple[str, bytes]], splits: Sequence[str], where: str
) -> tuple[dict[str, list[tuple[str, str, bytes | Path]]], str]:
    """Group ``(member path, bytes)`` by split and class, finding the folder prefix above the splits."""
    entries: dict[str, list[tuple[str, str, bytes | Path]]] = {s: [] for s in splits}
    prefixes: set[tuple[str, ...]] = set()
    for name, data in members:
        parts = PurePosixPath(name).parts
        at = next((i for i, p in enumerate(parts) if p in splits and len(parts) - i >= 3), None)
        if at is None:
            continue
        prefixes.add(parts[:at])
        entries[parts[at]].append((parts[at + 1], "/".join(parts[at + 2 :]), data))
    if len(prefixes) > 1:
        raise DataCorruptError(
            f"{where}: several image trees in one archive: {sorted('/'.join(p) for p in prefixes)}"
        )
    return entries, "/".join(next(iter(prefixes), ()))


def read_image_tarball(
    path: str | Path, splits: Sequence[str] = ("train", "test"), channels: int = 3, size: int | None = None
) -> tuple[Splits, tuple[str, ...]]:
    """Read an ImageFolder tree straight from a tar archive (any compression) without extracting it.

    The tree may sit under a top folder (``CIFAR10-jpg/train/...``) or at the archive root. Members are read
    as bytes only, so names such as ``../x`` cannot write anywhere. Returns the same as
    :func:`read_image_folder`.
    """
    path = Path(path)

    def members() -> Iterable[tuple[str, bytes]]:
        with tarfile.open(path, "r|*") as tar:
            for member in tar:
                if member.isfile() and _is_image(member.name):
                    if member.size > MAX_IMAGE_BYTES:
                        raise DataCorruptError(
                            f"{path}:{member.name}: {member.size} bytes, more than an image of a dataset "
                            f"should be ({MAX_IMAGE_BYTES >> 20} MiB at most)"
                        )
                    handle = tar.extractfile(member)
                    if handle is not None:
                        yield member.name, handle.read()

    try:
        entries, prefix = _tar_entries(members(), splits, str(path))
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataCorruptError(
            f"{path}: unreadable tar archive ({err}); the file is truncated or corrupt"
        ) from err
    where = f"{path}:{prefix}/" if prefix else f"{path}:"
    return _assemble(entries, splits, where, channels, size)
