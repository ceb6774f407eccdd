"""Split a training set over K clients: iid, label shards, Dirichlet label skew, LEAF writers, equal slices.

The equal slices hold ⌊N/K⌋ samples each, contiguous in the file's order or of a random permutation.
Every partitioner draws only from the ``numpy.random.Generator`` passed in (the scenario's ``"partition"``
stream, STYLE §3), so the same seed gives the same split. Each returns one ascending int64 index array per
client; iid, shard and dirichlet assign every sample to exactly one client, the equal slices leave the last
``N mod K`` unused. Consumers shuffle within a client (GAS uses ``DataLoader(shuffle=True)``, GAS spec
§10.11).

Example:
    >>> labels = np.repeat(np.arange(10), 10)
    >>> p = partition_dataset(labels, DataConfig(partition="shard"), 5, np.random.default_rng(0))
    >>> p.sizes.tolist(), int((p.histograms > 0).sum(axis=1).max()) <= 2
    ([20, 20, 20, 20, 20], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from raysfl.data.config import DataConfig
from raysfl.data.errors import PartitionError

DIRICHLET_MAX_TRIES = 1000


@dataclass(frozen=True, eq=False)
class Partition:
    """Client index arrays and their label statistics.

    Attributes:
        method: ``"iid"``, ``"shard"``, ``"dirichlet"``, ``"natural"``, ``"contiguous"`` or ``"iid-equal"``.
        indices: One ascending int64 array of training-sample indices per client.
        histograms: int64 ``(K, M)``: ``histograms[k, c]`` samples of class ``c`` at client ``k``.
        sizes: int64 ``(K,)``: samples per client (``|D_k|``, the weights of GAS eq. (10)).
    """

    method: str
    indices: tuple[np.ndarray, ...]
    histograms: np.ndarray
    sizes: np.ndarray

    @property
    def num_clients(self) -> int:
        """K, the number of clients."""
        return len(self.indices)


def label_histograms(
    labels: np.ndarray, parts: list[np.ndarray] | tuple[np.ndarray, ...], num_classes: int
) -> np.ndarray:
    """int64 ``(K, M)`` matrix of per-client label counts."""
    return np.stack([np.bincount(labels[p], minlength=num_classes)[:num_classes] for p in parts]).astype(
        np.int64
    )


def iid_partition(n: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Contiguous, (nearly) equal slices of a seeded permutation of ``range(n)`` (GAS spec §10.11).

    Sizes differ by at most one when ``K`` does not divide ``n``; no sample is dropped.
    """
    if n < num_clients:
        raise PartitionError(
            f"iid: {n} samples cannot give each of K={num_clients} clients one sample;"
            " lower federation.num_clients"
        )
    return [np.sort(s) for s in np.array_split(rng.permutation(n).astype(np.int64), num_clients)]


def _multiples(step: int) -> str:
    return ", ".join(str(step * i) for i in range(1, 5)) + ", ..."


def _shard_error(shards: int, num_clients: int, num_classes: int) -> PartitionError:
    step_s = num_classes // math.gcd(num_clients, num_classes)
    step_k = num_classes // math.gcd(shards, num_classes)
    return PartitionError(
        f"data.shards_per_client={shards} with K={num_clients} clients and {num_classes} classes:"
        f" shards_per_client·K must be a multiple of {num_classes} (GAS spec §10.11)."
        f" Valid data.shards_per_client for K={num_clients}: {_multiples(step_s)};"
        f" valid K for shards_per_client={shards}: {_multiples(step_k)}"
    )


def shard_partition(
    labels: np.ndarray, num_clients: int, shards_per_client: int, num_classes: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """GAS label shards (GAS spec §10.11): ``shards_per_client`` shards each, so at most that many labels.

    Each class's indices are permuted and cut into ``shards_per_client·K / M`` near-equal shards; the shard
    order is shuffled and client ``i`` takes shards ``order[i·s:(i+1)·s]``. Two shards may come from the
    same class, so a client can hold a single class.

    Raises:
        PartitionError: ``shards_per_client·K`` not a multiple of ``M``, or a class too small to cut.
    """
    s = shards_per_client
    if (s * num_clients) % num_classes:
        raise _shard_error(s, num_clients, num_classes)
    per_class = s * num_clients // num_classes
    shards: list[np.ndarray] = []
    for c in range(num_classes):
        members = np.flatnonzero(labels == c)
        if members.size < per_class:
            other = (
                ", or use data.partition = 'dirichlet' or 'iid'"
                if labels.size >= num_clients
                else f" (the dataset's {labels.size} samples cannot give {num_clients} clients one each)"
            )
            raise PartitionError(
                f"shard: class {c} has {members.size} samples, fewer than the {per_class} shards per class"
                f" that data.shards_per_client={s} with K={num_clients} needs; lower data.shards_per_client"
                f" or federation.num_clients{other}"
            )
        shards.extend(np.array_split(rng.permutation(members), per_class))
    order = rng.permutation(len(shards))
    return [
        np.sort(np.concatenate([shards[j] for j in order[i * s : (i + 1) * s]])).astype(np.int64)
        for i in range(num_clients)
    ]


def _dirichlet_cuts(
    by_class: list[np.ndarray], n: int, num_clients: int, alpha: float, rng: np.random.Generator
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """One NIID-bench draw: per class, Dir(α·1_K) proportions, zeroed for clients already at ≥ N/K.

    Returns each class's shuffled members with the cut points that split them among the clients, and the
    client sizes: whether a draw is kept needs only the sizes, so only a kept draw is cut into index arrays.
    """
    sizes = np.zeros(num_clients, dtype=np.int64)
    cut_classes = []
    for indices in by_class:
        members = rng.permutation(indices)
        p = rng.dirichlet(np.full(num_clients, alpha))
        p = np.where(sizes < n / num_clients, p, 0.0)
        total = p.sum()
        if not np.isfinite(total) or total <= 0:
            p = np.where(sizes < n / num_clients, 1.0, 0.0)
            total = p.sum()
        cuts = (np.cumsum(p / total) * members.size).astype(np.int64)[:-1]
        sizes += np.diff(cuts, prepend=0, append=members.size)
        cut_classes.append((members, cuts))
    return cut_classes, sizes


def _split_among_clients(
    cut_classes: list[tuple[np.ndarray, np.ndarray]], num_clients: int
) -> list[list[np.ndarray]]:
    """Each client's index arrays, one per class, from :func:`_dirichlet_cuts`."""
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for members, cuts in cut_classes:
        for k, chunk in enumerate(np.split(members, cuts)):
            parts[k].append(chunk)
    return parts


def dirichlet_partition(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    num_classes: int,
    rng: np.random.Generator,
    min_size: int = 10,
    max_tries: int = DIRICHLET_MAX_TRIES,
) -> list[np.ndarray]:
    """Dirichlet label skew, NIID-bench style (GAS spec §10.11; GAS's code uses ``min_require_size=10``).

    For each class, proportions ``q ~ Dir(α·1_K)``; a client that already holds ``≥ N/K`` samples gets
    proportion 0; the class's shuffled indices are cut at ``int(cumsum(q)·n_c)``. The whole draw is repeated
    until every client holds at least ``min_size`` samples. Smaller α gives more skewed label distributions.
    As in NIID-bench's code, the truncation can leave the last client one sample of a class even when its
    proportion is 0 (the cumulative sum before it rounds to just under 1) [C].

    Raises:
        PartitionError: ``N < K·min_size``, or no acceptable draw within ``max_tries``.
    """
    if alpha <= 0:
        raise PartitionError(f"data.alpha must be > 0, got {alpha}")
    if labels.shape[0] < num_clients * min_size:
        raise PartitionError(
            f"dirichlet: {labels.shape[0]} samples cannot give K={num_clients} clients"
            f" data.min_client_size={min_size} each; lower data.min_client_size or federation.num_clients"
        )
    by_class = [np.flatnonzero(labels == c) for c in range(num_classes)]
    for _ in range(max_tries):  # a draw is cut into index arrays only when kept: same draws, less work
        cut_classes, sizes = _dirichlet_cuts(by_class, labels.shape[0], num_clients, alpha, rng)
        if sizes.min() >= min_size:
            parts = _split_among_clients(cut_classes, num_clients)
            return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
    raise PartitionError(
        f"dirichlet: no draw in {max_tries} gave every one of K={num_clients} clients at least"
        f" data.min_client_size={min_size} samples with data.alpha={alpha}; lower data.min_client_size,"
        " raise data.alpha, or use fewer clients"
    )


def natural_partition(writers: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One client per LEAF writer (CSE-FSL spec §2.7-8, ``by_writer``).

    With ``K`` equal to the number of writers every writer is a client, in writer-index order; with fewer,
    ``K`` writers are drawn without replacement (then kept in writer-index order) and the other writers'
    samples are unused.

    Raises:
        PartitionError: ``K`` larger than the number of writers.
    """
    present = np.unique(writers)
    if num_clients > present.size:
        raise PartitionError(
            f"natural: K={num_clients} clients but the data has only {present.size} writers; set"
            f" federation.num_clients <= {present.size}"
        )
    chosen = (
        present if num_clients == present.size else np.sort(rng.choice(present, num_clients, replace=False))
    )
    order = np.argsort(writers, kind="stable")
    starts = np.searchsorted(writers[order], chosen, side="left")
    ends = np.searchsorted(writers[order], chosen, side="right")
    return [np.sort(order[a:b]).astype(np.int64) for a, b in zip(starts, ends, strict=True)]


def equal_slices(order: np.ndarray, num_clients: int, method: str) -> list[np.ndarray]:
    """Client k gets ``order[k·m : (k+1)·m]`` with m = ⌊N/K⌋; the last ``N mod K`` samples are unused.

    CSE-FSL's code splits F-EMNIST this way (CSE-FSL spec §2.7-8 [C]): ``contiguous`` takes the training set
    in its file order (LEAF writers one after another, so each client holds one or two writers' samples;
    Table V's loads assume these 209-sample clients), ``iid-equal`` a seeded permutation of it.

    Raises:
        PartitionError: fewer samples than clients.
    """
    n = order.shape[0]
    if n < num_clients:
        raise PartitionError(
            f"{method}: {n} samples cannot give each of K={num_clients} clients one sample;"
            " lower federation.num_clients"
        )
    m = n // num_clients
    return [np.sort(order[k * m : (k + 1) * m]).astype(np.int64) for k in range(num_clients)]


def partition_dataset(
    labels: np.ndarray,
    cfg: DataConfig,
    num_clients: int,
    rng: np.random.Generator,
    writers: np.ndarray | None = None,
    num_classes: int | None = None,
) -> Partition:
    """Split the training labels over ``num_clients`` clients as ``cfg.partition`` says.

    Args:
        labels: int ``(N,)`` training labels.
        cfg: Uses ``partition``, ``shards_per_client``, ``alpha`` and ``min_client_size``.
        num_clients: K.
        rng: The only source of randomness (the scenario's ``"partition"`` stream).
        writers: int ``(N,)`` writer index per sample; required by ``partition = "natural"``.
        num_classes: M; defaults to ``labels.max() + 1``.

    Raises:
        PartitionError: options that cannot produce a valid split; the message names the option.
    """
    labels = np.asarray(labels, dtype=np.int64)
    m = int(num_classes if num_classes is not None else labels.max() + 1)
    if num_clients < 1:
        raise PartitionError(f"need at least one client, got K={num_clients}")
    if cfg.partition == "iid":
        parts = iid_partition(labels.shape[0], num_clients, rng)
    elif cfg.partition == "shard":
        parts = shard_partition(labels, num_clients, cfg.shards_per_client, m, rng)
    elif cfg.partition == "dirichlet":
        parts = dirichlet_partition(labels, num_clients, cfg.alpha, m, rng, cfg.min_client_size)
    elif cfg.partition == "natural":
        if writers is None:
            raise PartitionError("data.partition='natural' needs per-sample writers (dataset 'femnist')")
        parts = natural_partition(np.asarray(writers, dtype=np.int64), num_clients, rng)
    elif cfg.partition == "contiguous":
        parts = equal_slices(np.arange(labels.shape[0], dtype=np.int64), num_clients, cfg.partition)
    elif cfg.partition == "iid-equal":
        parts = equal_slices(rng.permutation(labels.shape[0]).astype(np.int64), num_clients, cfg.partition)
    else:
        raise PartitionError(
            f"unknown data.partition {cfg.partition!r}; choose iid, shard, dirichlet, natural, contiguous"
            " or iid-equal"
        )
    hist = label_histograms(labels, parts, m)
    return Partition(cfg.partition, tuple(parts), hist, hist.sum(axis=1))
