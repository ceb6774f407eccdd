"""The device table: one row per client (compute rate, uplink, downlink, distance), its CSV trace format.

The CSV written by :meth:`DeviceTable.to_csv` is the trace format that ``compute.kind = "trace"`` and
``link.kind = "trace"`` read (DESIGN "The time model"): a header row, then one row per client::

    client,flops_per_s,uplink_bps,downlink_bps,distance_m
    0,3.2e9,1.2e7,1.2e7,412.5

``distance_m`` is optional (a missing column or an empty cell = unknown, NaN). Client ids must be the integers
0..K-1, each exactly once, in any order; rows with ids ≥ K are ignored when only K clients are asked for.

Example:
    >>> import numpy as np
    >>> t = DeviceTable(np.array([1e9, 4e9]), np.array([1e7, 2e7]), np.array([5e7, 5e7]))
    >>> len(t), t.summary()["flops_per_s"]["ratio"]
    (2, 4.0)
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from raysfl.config import ConfigError

COLUMNS = ("client", "flops_per_s", "uplink_bps", "downlink_bps", "distance_m")
RATE_COLUMNS = ("flops_per_s", "uplink_bps", "downlink_bps")
MAX_TRACE_BYTES = 64 << 20  # a trace holds about 80 bytes a client: 64 MiB is some 800,000 clients


def _frozen(values: Any, name: str, n: int | None) -> NDArray[np.float64]:
    arr = np.array(values, dtype=np.float64).reshape(-1)
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"DeviceTable.{name} has {arr.shape[0]} entries, expected {n}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class DeviceTable:
    """Per-client device profile, arrays of length K indexed by client id.

    Attributes:
        flops_per_s: compute rate f_k, FLOP/s.
        uplink_bps: uplink rate R_k^up, bit/s.
        downlink_bps: downlink rate R_k^dn, bit/s.
        distance_m: distance to the server, m; NaN when the links are not drawn from a wireless cell.

    The arrays are copied and made read-only. Rates must be finite and positive.
    """

    flops_per_s: NDArray[np.float64]
    uplink_bps: NDArray[np.float64]
    downlink_bps: NDArray[np.float64]
    distance_m: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        """Copy, freeze and check the arrays (same length, finite positive rates)."""
        n = np.size(self.flops_per_s)
        for name in RATE_COLUMNS:
            arr = _frozen(getattr(self, name), name, n)
            bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"DeviceTable.{name}[{i}] = {arr[i]!r}: rates must be finite and > 0")
            object.__setattr__(self, name, arr)
        dist = np.full(n, np.nan) if self.distance_m is None else self.distance_m
        object.__setattr__(self, "distance_m", _frozen(dist, "distance_m", n))

    def __len__(self) -> int:
        """K, the number of clients."""
        return int(self.flops_per_s.shape[0])

    def __eq__(self, other: object) -> bool:
        """Equal when every array matches exactly (NaN distances compare equal)."""
        if not isinstance(other, DeviceTable):
            return NotImplemented
        return all(np.array_equal(getattr(self, c), getattr(other, c), equal_nan=True) for c in COLUMNS[1:])

    __hash__ = None  # type: ignore[assignment]

    @property
    def wireless(self) -> bool:
        """Whether the table carries distances (a wireless or distance-bearing trace profile)."""
        return bool(np.any(np.isfinite(self.distance_m)))  # type: ignore[arg-type]  # an array since __post_init__

    def to_rows(self) -> list[dict[str, float | int]]:
        """One plain dict per client (``distance_m`` only when known), for TOML/JSON and printing."""
        rows: list[dict[str, float | int]] = []
        for k in range(len(self)):
            row: dict[str, float | int] = {"client": k}
            for name in RATE_COLUMNS:
                row[name] = float(getattr(self, name)[k])
            d = float(self.distance_m[k])  # type: ignore[index]
            if math.isfinite(d):
                row["distance_m"] = d
            rows.append(row)
        return rows

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], source: str = "rows") -> DeviceTable:
        """Rebuild a table from :meth:`to_rows` output (client ids 0..K-1 in any order).

        Raises:
            ConfigError: naming ``source``, the row and the column of every bad value.
        """
        return _parse_rows([dict(r) for r in rows], source, None, first_line=0)

    def summary(self) -> dict[str, Any]:
        """Min/median/max of each column and max/min ratios (compute ratio = slowest/fastest time)."""
        out: dict[str, Any] = {"num_clients": len(self)}
        for name in (*RATE_COLUMNS, "distance_m"):
            arr = getattr(self, name)
            if name == "distance_m" and not self.wireless:
                continue
            stats = {
                "min": float(np.nanmin(arr)),
                "median": float(np.nanmedian(arr)),
                "max": float(np.nanmax(arr)),
            }
            if name != "distance_m":
                stats["ratio"] = stats["max"] / stats["min"]
            out[name] = stats
        return out

    def to_csv(self, path: str | Path) -> None:
        """Write the table in the trace format (floats in full precision, so a round trip is exact)."""
        wireless = self.wireless
        with Path(path).open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(COLUMNS if wireless else COLUMNS[:-1])
            for row in self.to_rows():
                cells = [str(row["client"]), *(repr(row[c]) for c in RATE_COLUMNS)]
                if wireless:
                    cells.append(repr(row["distance_m"]) if "distance_m" in row else "")
                writer.writerow(cells)

    @classmethod
    def from_csv(cls, path: str | Path, num_clients: int | None = None) -> DeviceTable:
        """Read a trace CSV; with ``num_clients`` = K, keep clients 0..K-1 (the file may list more).

        Raises:
            ConfigError: the file is missing, a directory, unreadable, not UTF-8 text, too large or empty,
                a column is missing, a value is not a finite positive number, a client id is repeated or
                missing; each problem names the file, the row (line number) and the column.
        """
        p = Path(path)
        reader = csv.DictReader(io.StringIO(_read_text(p), newline=""))
        try:
            fields = [f.strip() for f in reader.fieldnames or []]
            if not fields:
                raise ConfigError([f"{p}: trace file is empty; expected a header {','.join(COLUMNS)}"])
            missing = [c for c in COLUMNS[:4] if c not in fields]
            unknown = [c for c in fields if c not in COLUMNS]
            if missing or unknown:
                why = [f"missing column(s) {', '.join(missing)}"] if missing else []
                why += [f"unknown column(s) {', '.join(unknown)}"] if unknown else []
                expected = ",".join(COLUMNS)
                raise ConfigError([f"{p}: line 1 (header): {'; '.join(why)}; expected {expected}"])
            reader.fieldnames = fields
            rows = list(reader)
        except csv.Error as err:  # a cell over the csv module's size limit, a stray quote
            line = reader.reader.line_num  # DictReader's own line_num stops at the last good row
            raise ConfigError([f"{p}: line {line}: not a valid CSV row ({err})"]) from None
        return _parse_rows(rows, str(p), num_clients, first_line=2)


def _read_text(p: Path) -> str:
    """The text of the trace file ``p``; every way reading it can fail is a :class:`ConfigError` naming it.

    At most :data:`MAX_TRACE_BYTES` are read (``/dev/zero`` given by mistake must not fill the memory), and
    the text must be UTF-8 (a leading byte-order mark, as spreadsheets write, is dropped).
    """
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_TRACE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError([f"{p}: trace file not found"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{p}: is a directory; give the path of a CSV trace file"]) from None
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise ConfigError(
            [f"{p}: cannot read the trace file: {getattr(err, 'strerror', None) or err}"]
        ) from None
    if len(data) > MAX_TRACE_BYTES:
        limit = f"{MAX_TRACE_BYTES >> 20} MiB"
        raise ConfigError([f"{p}: larger than {limit}; a trace is a CSV text file of some 80 bytes a client"])
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        where = f"byte {data[err.start]:#04x} at offset {err.start}"
        raise ConfigError([f"{p}: not a UTF-8 text file ({where}); a trace is a CSV text file"]) from None


def _parse_rows(
    rows: list[dict[str, Any]], source: str, num_clients: int | None, first_line: int
) -> DeviceTable:
    """Validate raw rows into a table; ``first_line`` numbers rows in messages (CSV: 2, after the header)."""
    problems: list[str] = []
    by_client: dict[int, tuple[int, dict[str, float]]] = {}
    where_word = "line" if first_line else "row"
    for i, raw in enumerate(rows):
        line = first_line + i
        where = f"{source}: {where_word} {line}"
        if None in raw:  # csv.DictReader puts surplus cells under the key None
            problems.append(f"{where}: more cells than the {len(raw) - 1} header columns")
            continue
        cid = _int_cell(raw.get("client"), f"{where}, column 'client'", problems)
        values: dict[str, float] = {}
        for name in (*RATE_COLUMNS, "distance_m"):
            optional = name == "distance_m"
            value = _float_cell(raw.get(name), f"{where}, column '{name}'", problems, optional=optional)
            if value is not None:
                values[name] = value
        if cid is None:
            continue
        if cid in by_client:
            first = by_client[cid][0]
            problems.append(f"{where}, column 'client': client {cid} already given on {where_word} {first}")
            continue
        by_client[cid] = (line, values)
    k = num_clients if num_clients is not None else len(by_client)
    if not problems:
        absent = [c for c in range(k) if c not in by_client]
        if absent:
            shown = ", ".join(str(c) for c in absent[:10]) + (" ..." if len(absent) > 10 else "")
            problems.append(
                f"{source}: column 'client': no row for client(s) {shown}; "
                f"need ids 0..{k - 1} ({len(by_client)} rows given)"
            )
    if problems:
        raise ConfigError(problems)
    chosen = [by_client[c][1] for c in range(k)]
    return DeviceTable(
        flops_per_s=np.array([v["flops_per_s"] for v in chosen]),
        uplink_bps=np.array([v["uplink_bps"] for v in chosen]),
        downlink_bps=np.array([v["downlink_bps"] for v in chosen]),
        distance_m=np.array([v.get("distance_m", np.nan) for v in chosen]),
    )


def _int_cell(value: Any, where: str, problems: list[str]) -> int | None:
    text = str(value).strip() if value is not None else ""
    try:
        out = int(text) if not isinstance(value, int) else value
    except ValueError:
        problems.append(f"{where}: expected a client id (integer ≥ 0), got {text!r}")
        return None
    if out < 0 or isinstance(value, bool):
        problems.append(f"{where}: expected a client id (integer ≥ 0), got {text!r}")
        return None
    return out


def _float_cell(value: Any, where: str, problems: list[str], optional: bool = False) -> float | None:
    text = str(value).strip() if value is not None else ""
    if not text and optional:
        return None
    try:
        out = float(text)
    except ValueError:
        problems.append(
            f"{where}: expected a number > 0, got {text!r}" if text else f"{where}: missing value"
        )
        return None
    if not (math.isfinite(out) and out > 0):
        if optional and math.isnan(out):
            return None
        problems.append(f"{where}: expected a finite number > 0, got {text!r}")
        return None
    return out


def describe_devices(table: DeviceTable, max_rows: int | None = None) -> str:
    """A human table (client, GFLOP/s, distance m, up Mb/s, down Mb/s) and a summary line.

    Used by ``raysfl describe devices SCENARIO``. With ``max_rows``, longer tables show their first and
    last rows around an ellipsis line.
    """
    header = f"{'client':>6}  {'GFLOP/s':>9}  {'distance m':>10}  {'up Mb/s':>9}  {'down Mb/s':>9}"
    lines = [header, "-" * len(header)]
    k = len(table)
    shown: list[int | None] = list(range(k))
    if max_rows is not None and k > max(max_rows, 2):
        head = max_rows // 2
        shown = [*range(head), None, *range(k - (max_rows - head), k)]
    for c in shown:
        if c is None:
            lines.append(f"{'...':>6}  ({k - len(shown) + 1} more)")
            continue
        d = float(table.distance_m[c])  # type: ignore[index]
        dist = f"{d:10.1f}" if math.isfinite(d) else f"{'-':>10}"
        lines.append(
            f"{c:>6}  {table.flops_per_s[c] / 1e9:9.3f}  {dist}  "
            f"{table.uplink_bps[c] / 1e6:9.3f}  {table.downlink_bps[c] / 1e6:9.3f}"
        )
    s = table.summary()
    f, up, dn = s["flops_per_s"], s["uplink_bps"], s["downlink_bps"]
    lines.append(
        f"{k} clients; compute {_span(f, 1e9)} GFLOP/s, slowest/fastest {f['ratio']:.2f}; "
        f"up {_span(up, 1e6)} Mb/s; down {_span(dn, 1e6)} Mb/s"
    )
    return "\n".join(lines)


def _span(stats: Mapping[str, float], unit: float) -> str:
    return f"{stats['min'] / unit:.3g} to {stats['max'] / unit:.3g} (median {stats['median'] / unit:.3g})"
