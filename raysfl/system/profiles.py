"""Device profiles: draw each client's compute rate and link rates from a :class:`SystemConfig`.

:func:`draw_devices` draws only from the generator it is given (the engine passes its named ``"timing"``
stream, DESIGN "The engine"; STYLE §1.5), and always in the same layout so a run is reproducible and one
choice does not shift another's draws:

    u = rng.random((3, K))   # one call, whatever the kinds
    u[0]: compute  (uniform rate, or the ratio's slowdown / rate)
    u[1]: uplink   (uniform uplink rate, or the wireless distance)
    u[2]: downlink (uniform downlink rate)

Every generator is an inverse-CDF transform of its row; ``fixed`` and ``trace`` kinds ignore theirs.
Changing ``compute.kind`` therefore leaves the distances unchanged, and vice versa.

Example:
    >>> import numpy as np
    >>> from raysfl.system.config import SystemConfig
    >>> t = draw_devices(SystemConfig(), 20, np.random.default_rng(2023))
    >>> len(t), bool(1e9 <= t.flops_per_s.min() <= t.flops_per_s.max() <= 1e10)
    (20, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from raysfl.config import ConfigError
from raysfl.system.channel import channel_gain, dbm_to_w, shannon_rate_bps
from raysfl.system.config import ComputeConfig, LinkConfig, SystemConfig
from raysfl.system.table import DeviceTable, describe_devices

__all__ = [
    "MIN_RATE",
    "DeviceTable",
    "compute_rates",
    "describe_devices",
    "distances_m",
    "draw_devices",
    "link_rates",
    "rate_problems",
    "wireless_rates_bps",
]

Floats = NDArray[np.float64]

MIN_RATE = 1.0
"""The slowest rate a drawn device may have: 1 FLOP/s of compute, 1 bit/s on a link.

Slower, a run's emulated times stop making sense and then overflow (one 1 MB message at 1 bit/s takes three
months). A rate of 0, below this, infinite or NaN comes from options that defeat each other (a transmit
power of -100 dBm, a bandwidth of 1e-300 Hz, ``bandwidth_reduction = 1e308``): :func:`draw_devices` refuses
it naming those options (:func:`rate_problems`).
"""

_RATES = {
    "flops_per_s": ("compute", "FLOP/s"),
    "uplink_bps": ("uplink", "bit/s"),
    "downlink_bps": ("downlink", "bit/s"),
}


def compute_rates(cfg: ComputeConfig, u: Floats) -> Floats:
    """Compute rates f_k (FLOP/s) from uniforms ``u`` in [0, 1), one per client.

    * ``uniform``: f = min + (max - min)·u, GAS spec §8.1 [P] / §10.3 [C].
    * ``ratio`` with ``ratio_sampling = "time"``: slowdown r = 1 + (R - 1)·u, f = max/r, so training
      *times* are uniform within the ratio R (fedasmu §2.5 [P], §2.6 [A]); ``"rate"``: f uniform in
      [max/R, max]. ``pin_extremes`` sets the smallest u to 0 and the largest to 1, so one device runs at
      exactly max and one at max/R, making max/min exactly R (fedasmu §2.6 option): under ``"time"`` the
      smallest u is the fastest device, under ``"rate"`` the slowest.
    * ``fixed``: f = ``flops_per_s``.

    Raises:
        ValueError: ``kind = "trace"`` (read the trace with :meth:`DeviceTable.from_csv`).
    """
    k = u.shape[0]
    if cfg.kind == "fixed":
        return np.full(k, cfg.flops_per_s)
    if cfg.kind == "uniform":
        return cfg.min_flops_per_s + (cfg.max_flops_per_s - cfg.min_flops_per_s) * u
    if cfg.kind == "ratio":
        v = u.copy()
        if cfg.pin_extremes and k >= 2:
            v[np.argmin(u)], v[np.argmax(u)] = 0.0, 1.0
        fastest = cfg.max_flops_per_s
        if cfg.ratio_sampling == "time":
            return fastest / (1.0 + (cfg.ratio - 1.0) * v)
        return fastest / cfg.ratio + (fastest - fastest / cfg.ratio) * v
    raise ValueError(f"compute.kind = {cfg.kind!r} has no generator; 'trace' rates come from the trace file")


def distances_m(cfg: LinkConfig, u: Floats) -> Floats:
    """Client distances (m) from uniforms ``u`` in the annulus min_distance_m ≤ d ≤ radius_m.

    ``placement = "area"``: uniform over the annulus' area, d = sqrt(d0² + (R² - d0²)·u), as GAS states
    ("randomly and uniformly distributed within the cell", GAS spec §8.1 [P]).
    ``"radius"``: d = d0 + (R - d0)·u, as the GAS code draws r ~ U(0.1, 1) km (GAS spec §10.3 [C], §11 row 6).
    """
    d0, r = cfg.min_distance_m, cfg.radius_m
    if cfg.placement == "area":
        try:
            d0_sq, r_sq = d0**2, r**2
        except OverflowError:  # a radius over 1e154 m: infinite distances, refused with the rates they give
            return np.full(np.shape(u), np.inf)
        return np.sqrt(d0_sq + (r_sq - d0_sq) * u)
    return d0 + (r - d0) * u


def wireless_rates_bps(cfg: LinkConfig, distance_m: Floats, num_clients: int) -> tuple[Floats, Floats]:
    """Uplink and downlink Shannon rates (bit/s) at the given distances, before ``bandwidth_reduction``.

    Each link uses bandwidth W_k = W (``bandwidth_mode = "per-client"``: GAS code [C]; lightweight-fedsl
    §2.2's own 5 MHz subchannel per client) or W/K (``"shared"``: orthogonal access splitting the total W
    equally among the K clients: GAS §8.1 says "orthogonal uplink channel access with a total bandwidth W"
    [P] without saying how W is shared, so the equal split over all K, not over the clients sending at
    once, is a reading [A]). The downlink uses the same W_k with the server's power
    (lightweight-fedsl §2.2).
    """
    w = cfg.bandwidth_hz / num_clients if cfg.bandwidth_mode == "shared" else cfg.bandwidth_hz
    d = np.asarray(distance_m, dtype=np.float64)
    gain = np.asarray(channel_gain(d, cfg.path_loss_a_db, cfg.path_loss_b_db))
    n0 = dbm_to_w(cfg.noise_dbm_per_hz)
    up = np.asarray(shannon_rate_bps(w, cfg.client_power_w, gain, n0), dtype=np.float64)
    down = np.asarray(shannon_rate_bps(w, cfg.server_power_w, gain, n0), dtype=np.float64)
    return up, down


def link_rates(cfg: LinkConfig, u_up: Floats, u_down: Floats) -> tuple[Floats, Floats, Floats]:
    """Uplink, downlink (bit/s, divided by ``bandwidth_reduction``) and distance (m, NaN unless wireless).

    Raises:
        ValueError: ``kind = "trace"`` (read the trace with :meth:`DeviceTable.from_csv`).
    """
    k = u_up.shape[0]
    dist = np.full(k, np.nan)
    if cfg.kind == "fixed":
        up, down = np.full(k, cfg.uplink_bps), np.full(k, cfg.downlink_bps)
    elif cfg.kind == "uniform":
        up = cfg.min_uplink_bps + (cfg.max_uplink_bps - cfg.min_uplink_bps) * u_up
        if cfg.downlink_to_uplink > 0:
            down = cfg.downlink_to_uplink * up
        else:
            down = cfg.min_downlink_bps + (cfg.max_downlink_bps - cfg.min_downlink_bps) * u_down
    elif cfg.kind == "wireless":
        dist = distances_m(cfg, u_up)
        up, down = wireless_rates_bps(cfg, dist, k)
    else:
        raise ValueError(f"link.kind = {cfg.kind!r} has no generator; 'trace' rates come from the trace file")
    return up / cfg.bandwidth_reduction, down / cfg.bandwidth_reduction, dist


def _option(section: Any, prefix: str, name: str) -> tuple[str, Any, Any]:
    """``(dotted name, value, default)`` of the option ``name`` of the config dataclass ``section``."""
    default = next(f.default for f in dataclasses.fields(section) if f.name == name)
    return f"{prefix}.{name}", getattr(section, name), default


def _rate_inputs(
    cfg: SystemConfig, column: str, num_clients: int
) -> tuple[str, str, list[tuple[str, Any, Any]]]:
    """The kind option of ``column``, its value, and ``(name, value, default)`` of each option it reads."""
    trace = ("system.trace_file", cfg.trace_file, "")
    if column == "flops_per_s":
        comp = cfg.compute
        if comp.kind == "trace":
            return "system.compute.kind", comp.kind, [trace]
        drawn_by = {
            "fixed": ["flops_per_s"],
            "uniform": ["min_flops_per_s", "max_flops_per_s"],
            "ratio": ["max_flops_per_s", "ratio", "ratio_sampling", "pin_extremes"],
        }[comp.kind]
        return "system.compute.kind", comp.kind, [_option(comp, "system.compute", n) for n in drawn_by]
    link, up = cfg.link, column == "uplink_bps"
    names: list[str] = []
    if link.kind == "fixed":
        names = [column]
    elif link.kind == "uniform" and (up or link.downlink_to_uplink > 0):
        names = ["min_uplink_bps", "max_uplink_bps"] + ([] if up else ["downlink_to_uplink"])
    elif link.kind == "uniform":
        names = ["min_downlink_bps", "max_downlink_bps"]
    elif link.kind == "wireless":
        power = "tx_power" if up else "server_tx_power"
        power += "_dbm" if getattr(link, power + "_dbm") > -math.inf else "_w"  # -inf: the power in W
        names = ["radius_m", "min_distance_m", "placement", "path_loss_a_db", "path_loss_b_db", power]
        names += ["bandwidth_hz", "bandwidth_mode", "noise_dbm_per_hz"]
    inputs = [_option(link, "system.link", n) for n in [*names, "bandwidth_reduction"]]
    if link.kind == "trace":
        inputs.insert(0, trace)
    if link.kind == "wireless" and link.bandwidth_mode == "shared":  # W/K: the client count is one too
        inputs.append(("federation.num_clients", num_clients, num_clients))
    return "system.link.kind", link.kind, inputs


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _set_by(kind_name: str, names: list[str]) -> str:
    """``system.link.{a, b} and federation.num_clients``: the options of the kind's section, then the rest."""
    section = kind_name.rsplit(".", 1)[0] + "."
    own = [n.removeprefix(section) for n in names if n.startswith(section)]
    rest = [n for n in names if not n.startswith(section)]
    grouped = [section + (own[0] if len(own) == 1 else "{" + ", ".join(own) + "}")] if own else []
    return " and ".join(grouped + rest)


def rate_problems(cfg: SystemConfig, num_clients: int, rates: Mapping[str, Any]) -> list[str]:
    """Why drawn rates cannot be run: a problem per column with a rate not finite or below :data:`MIN_RATE`.

    ``rates`` maps ``flops_per_s``, ``uplink_bps`` and ``downlink_bps`` to the K drawn values. A problem
    starts with the options behind the column that are set away from their defaults (all of them when none
    is), with their values, then names the first bad client and its rate, and every option that sets the
    column under its kind.
    """
    problems = []
    for column, values in rates.items():
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        bad = np.flatnonzero(~(np.isfinite(arr) & (arr >= MIN_RATE)))
        if not bad.size:
            continue
        what, unit = _RATES[column]
        kind_name, kind, inputs = _rate_inputs(cfg, column, num_clients)
        lead = [(n, v) for n, v, default in inputs if v != default] or [(n, v) for n, v, _ in inputs]
        names = ", ".join(n for n, _ in lead)
        if len(lead) == 1:
            values_text = f"{_shown(lead[0][1])} gives"
        else:
            values_text = ", ".join(f"{n.rsplit('.', 1)[1]} = {_shown(v)}" for n, v in lead) + " give"
        i = int(bad[0])
        count = f"all {arr.size}" if bad.size == arr.size else f"{bad.size} of the {arr.size}"
        more = f" ({count} clients are out of range)" if arr.size > 1 else ""
        problems.append(
            f"{names}: {values_text} client {i} {_a(what)} rate of {arr[i]:.3g} {unit}{more}; a rate "
            f"must be finite and at least {MIN_RATE:g} {unit}. With {kind_name} = {kind!r} it is set by "
            + _set_by(kind_name, [n for n, _, _ in inputs])
        )
    return problems


def draw_devices(cfg: SystemConfig, num_clients: int, rng: np.random.Generator) -> DeviceTable:
    """Draw the K-client device table for ``cfg`` from ``rng`` (and ``cfg.trace_file`` for trace kinds).

    Draws exactly ``rng.random((3, num_clients))`` whatever the kinds (layout in the module docstring), so
    the same seed gives the same table and the stream afterwards is in the same state.
    ``bandwidth_reduction`` also divides trace link rates. ``trace_file`` is opened as given: a relative
    path from the working directory (:func:`raysfl.scenario.load_scenario` makes a scenario file's path
    absolute, relative to the file's folder, and a command-line override's relative to the working
    directory).

    Raises:
        ValueError: ``num_clients`` < 1.
        raysfl.config.ConfigError: the trace file cannot be read or is malformed (each problem starts with
            ``system.trace_file`` and names the file, row and column), or a drawn rate is not finite or
            below :data:`MIN_RATE` (each problem names the options behind it, :func:`rate_problems`).
    """
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    u = rng.random((3, num_clients))
    trace = None
    if "trace" in (cfg.compute.kind, cfg.link.kind):
        try:
            trace = DeviceTable.from_csv(Path(cfg.trace_file), num_clients)
        except ConfigError as err:
            raise ConfigError([f"system.trace_file: {p}" for p in err.problems]) from None
    with np.errstate(all="ignore"):  # an overflow or underflow shows in the rates, refused by name below
        if trace is not None and cfg.compute.kind == "trace":
            flops = trace.flops_per_s
        else:
            flops = compute_rates(cfg.compute, u[0])
        if trace is not None and cfg.link.kind == "trace":
            kappa = cfg.link.bandwidth_reduction
            up, down, dist = trace.uplink_bps / kappa, trace.downlink_bps / kappa, trace.distance_m
        else:
            up, down, dist = link_rates(cfg.link, u[1], u[2])
    problems = rate_problems(cfg, num_clients, {"flops_per_s": flops, "uplink_bps": up, "downlink_bps": down})
    if problems:
        raise ConfigError(problems)
    return DeviceTable(flops_per_s=flops, uplink_bps=up, downlink_bps=down, distance_m=dist)
