"""System section of a scenario: device compute rates, links and how operations are charged in time.

Tags on every option (see ``shared/specs/README.md``): [P] stated in a paper, [C] what a public reference
code does, [A] an implementation choice. Where a paper and its code differ, both behaviours are options and
the default follows the paper (DESIGN "Properties": paper first, code where the paper is silent).

The defaults describe the GAS device model (GAS spec §8.1): compute rates f_k ~ U(1e9, 1e10) FLOP/s and a
1 km wireless cell with the 3GPP path loss 128.1 + 37.6·log10(d_km), 0.2 W transmit power, W = 10 MHz and
N_0 = -174 dBm/Hz. The GAS reference code differs in three ways (GAS spec §10.3, §11 rows 6–8), each an
option here: ``link.placement = "radius"``, ``link.bandwidth_mode = "per-client"`` and its clock:
``timing.flops_accounting = "per-sample"`` with ``timing.free_downloads = true`` charges one sample's
*measured* FLOPs per pass; the code's exact charges are its hard-coded constants, which
``timing.client_pass_flops``, ``timing.activation_bits`` and ``timing.client_model_bits`` set (see
:class:`TimingConfig`).

Example:
    >>> from raysfl.config import build
    >>> cfg = build(SystemConfig, {"link": {"kind": "fixed", "uplink_bps": 2e7}}, "system")
    >>> cfg.link.uplink_bps, cfg.compute.kind
    (20000000.0, 'uniform')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from raysfl.config import option

COMPUTE_KINDS = ("fixed", "uniform", "ratio", "trace")
TRAINING_TIMES = ("per-sample", "per-device")
LINK_KINDS = ("fixed", "uniform", "wireless", "trace")
POWER_DBM_RANGE = (-100.0, 100.0)  # 0.1 pW to 10 MW: wider than any radio's transmit power
NOISE_DBM_PER_HZ_RANGE = (-250.0, 0.0)  # thermal noise is -174 dBm/Hz at 290 K, -199 at 1 K


def _power_dbm_problem(unset_by: str) -> Callable[[float], str | None]:
    """A ``check`` for a transmit power in dBm: -inf (unset: ``unset_by`` in W applies) or within range."""
    low, high = POWER_DBM_RANGE

    def check(value: float) -> str | None:
        if value == -math.inf or low <= value <= high:
            return None
        return f"is out of range; give {low:g} to {high:g} dBm, or -inf (the default) to use {unset_by}"

    return check


_FIXED = {"kind": ("fixed",)}  # options only kind = fixed reads
_UNIFORM = {"kind": ("uniform",)}  # options only kind = uniform reads
_RATIO = {"kind": ("ratio",)}  # options only kind = ratio reads
_WIRELESS = {"kind": ("wireless",)}  # options only kind = wireless reads


@dataclass(frozen=True)
class ComputeConfig:
    """How each client's compute rate f_k (FLOP/s) is chosen.

    ``kind``:
      * ``"fixed"``: every client computes at ``flops_per_s``.
      * ``"uniform"``: f_k ~ U(min_flops_per_s, max_flops_per_s), GAS spec §8.1 [P], §10.3 [C].
      * ``"ratio"``: FedASMU's heterogeneity ratio R = ``ratio`` (slowest/fastest time = 5 [P], fedasmu
        §2.5): the fastest client runs at ``max_flops_per_s``, the slowest no slower than ``max/R``.
        ``ratio_sampling = "time"`` draws the slowdown r_k ~ U[1, R] and sets f_k = max/r_k ("each device's
        training time randomly sampled within this range" [P], fedasmu §2.6 [A]); ``"rate"`` draws
        f_k ~ U[max/R, max] instead. ``pin_extremes`` sets the fastest draw to exactly 1 and the slowest to
        exactly R so max/min equals R (fedasmu §2.6 option [A]).
      * ``"trace"``: the ``flops_per_s`` column of ``system.trace_file``.

    ``training_time``: ``"per-sample"`` charges a job its FLOPs over f_k, so a device whose local epochs pass
    over more data trains longer [A]. ``"per-device"``: a job's time depends on the device alone, FedASMU
    §6.1.4 read literally ("the slowest device's training time is five times that of the fastest") [P].
    FedASMU and FedSSMU then charge each local epoch as a pass over mean-size data, mean_j |D_j|, at f_k
    (an epoch of a fixed ``epoch_steps`` as it is).
    Methods whose jobs take a fixed number of minibatch steps (the FL baselines, GAS, Lightweight FedSL)
    already have per-device times and run the same either way (up to the short last batch of a pass over
    D_k, charged as it is); methods whose work grows with the client's data in another way (the CSE-FSL
    family, MiniBatch-SFL, S2FL) refuse ``"per-device"``.
    """

    kind: str = option("uniform", choices=COMPUTE_KINDS, doc="compute-rate generator")
    flops_per_s: float = option(1e9, gt=0, doc="kind=fixed: every client's rate, FLOP/s [A]", applies=_FIXED)
    min_flops_per_s: float = option(
        1e9, gt=0, doc="kind=uniform: lower end, FLOP/s [P] GAS §8.1", applies=_UNIFORM
    )
    max_flops_per_s: float = option(
        1e10,
        gt=0,
        doc="kind=uniform: upper end; kind=ratio: the fastest client's rate, FLOP/s [P] GAS §8.1",
        applies={"kind": ("uniform", "ratio")},
    )
    ratio: float = option(
        5.0,
        ge=1,
        doc="kind=ratio: slowest/fastest time ratio R [P] fedasmu §2.5",
        applies=_RATIO,
    )
    ratio_sampling: str = option(
        "time",
        choices=("time", "rate"),
        doc="kind=ratio: uniform in time (r ~ U[1,R], f = max/r) [P] fedasmu §2.6, or uniform in rate [A]",
        applies=_RATIO,
    )
    pin_extremes: bool = option(
        False,
        doc="kind=ratio: pin one client at 1 and one at R [A] fedasmu §2.6",
        applies=_RATIO,
    )
    training_time: str = option(
        "per-sample",
        choices=TRAINING_TIMES,
        doc="per-sample: a job over more data takes longer [A]; per-device: a job's time depends on the "
        "device alone, FedASMU's epochs charged as passes over mean-size data (FedASMU §6.1.4) [P] unless "
        "algorithm.params.epoch_steps fixes their steps",
    )

    def __post_init__(self) -> None:
        """Reject an empty uniform range (``kind = "uniform"``; the other kinds do not read it)."""
        if self.kind == "uniform" and self.min_flops_per_s > self.max_flops_per_s:
            low, high = self.min_flops_per_s, self.max_flops_per_s
            raise ValueError(f"min_flops_per_s ({low:g}) exceeds max_flops_per_s ({high:g})")


@dataclass(frozen=True)
class LinkConfig:
    """How each client's uplink and downlink rates (bit/s) are chosen.

    ``kind``:
      * ``"fixed"``: every client gets ``uplink_bps`` / ``downlink_bps``.
      * ``"uniform"``: R_up ~ U(min_uplink_bps, max_uplink_bps); R_dn ~ U(min_downlink_bps, max_downlink_bps),
        or R_dn = ``downlink_to_uplink``·R_up when that is > 0 (fedasmu §2.6 [A]: U[5, 20] Mb/s and 5×).
      * ``"wireless"``: distance d_k in the cell, path loss PL = a + b·log10(d_km), Shannon rate
        R = W_k log2(1 + P·10^(-PL/10)/(N_0·W_k)) (GAS spec §8.1, §10.3; lightweight-fedsl §2.2).
      * ``"trace"``: the ``uplink_bps``/``downlink_bps`` (and optional ``distance_m``) columns of
        ``system.trace_file``.

    Every kind divides both rates by ``bandwidth_reduction`` (FedASMU's κ ∈ {1, 50, 100}, fedasmu §2.6).
    The rates these options give must come out finite and at least 1 bit/s: options that drive them to 0,
    infinity or an underflow are refused by name when the devices are drawn
    (:func:`raysfl.system.profiles.draw_devices`).
    """

    kind: str = option("wireless", choices=LINK_KINDS, doc="link-rate generator")
    uplink_bps: float = option(1e7, gt=0, doc="kind=fixed: uplink rate, bit/s [A]", applies=_FIXED)
    downlink_bps: float = option(1e7, gt=0, doc="kind=fixed: downlink rate, bit/s [A]", applies=_FIXED)
    min_uplink_bps: float = option(
        5e6, gt=0, doc="kind=uniform: uplink lower end [A] fedasmu §2.6", applies=_UNIFORM
    )
    max_uplink_bps: float = option(
        2e7, gt=0, doc="kind=uniform: uplink upper end [A] fedasmu §2.6", applies=_UNIFORM
    )
    min_downlink_bps: float = option(
        2.5e7, gt=0, doc="kind=uniform: downlink lower end [A]", applies=_UNIFORM
    )
    max_downlink_bps: float = option(1e8, gt=0, doc="kind=uniform: downlink upper end [A]", applies=_UNIFORM)
    downlink_to_uplink: float = option(
        0.0,
        ge=0,
        doc="kind=uniform: >0 sets R_dn = this × R_up instead of drawing it (fedasmu §2.6: 5) [A]",
        applies=_UNIFORM,
    )
    radius_m: float = option(
        1000.0, gt=0, doc="kind=wireless: cell radius, m [P] GAS §8.1", applies=_WIRELESS
    )
    min_distance_m: float = option(
        100.0, gt=0, doc="kind=wireless: closest client, m [C] GAS §10.3", applies=_WIRELESS
    )
    placement: str = option(
        "area",
        choices=("area", "radius"),
        doc="kind=wireless: uniform in the annulus' area [P] GAS §8.1, or d ~ U(min, radius) [C] GAS §10.3",
        applies=_WIRELESS,
    )
    path_loss_a_db: float = option(
        128.1,
        ge=0,
        doc="kind=wireless: path-loss intercept a (the loss at 1 km), dB [P] GAS §8.1",
        applies=_WIRELESS,
    )
    path_loss_b_db: float = option(
        37.6,
        ge=0,
        doc="kind=wireless: path-loss slope b, dB per decade of km (the loss grows with d) [P]",
        applies=_WIRELESS,
    )
    tx_power_w: float = option(
        0.2, gt=0, doc="kind=wireless: client transmit power, W [P] GAS §8.1", applies=_WIRELESS
    )
    tx_power_dbm: float = option(
        -math.inf,
        check=_power_dbm_problem("tx_power_w"),
        doc="kind=wireless: client power, -100 to 100 dBm; -inf = use tx_power_w (lightweight-fedsl: 23) [P]",
        applies=_WIRELESS,
    )
    server_tx_power_w: float = option(
        0.2,
        gt=0,
        doc="kind=wireless: server (downlink) transmit power, W; GAS is silent, same as client [A]",
        applies=_WIRELESS,
    )
    server_tx_power_dbm: float = option(
        -math.inf,
        check=_power_dbm_problem("server_tx_power_w"),
        doc="kind=wireless: server power, -100 to 100 dBm; -inf = use server_tx_power_w "
        "(lightweight-fedsl: 37) [P]",
        applies=_WIRELESS,
    )
    bandwidth_hz: float = option(
        1e7, gt=0, doc="kind=wireless: bandwidth W, Hz [P] GAS §8.1", applies=_WIRELESS
    )
    bandwidth_mode: str = option(
        "shared",
        choices=("shared", "per-client"),
        doc="kind=wireless: W/K, an equal split of the total W over the K clients (one reading of GAS §8.1's "
        '"orthogonal uplink channel access with a total bandwidth W" [A]), or W each [C] GAS §10.3',
        applies=_WIRELESS,
    )
    noise_dbm_per_hz: float = option(
        -174.0,
        ge=NOISE_DBM_PER_HZ_RANGE[0],
        le=NOISE_DBM_PER_HZ_RANGE[1],
        doc="kind=wireless: noise PSD N_0, dBm/Hz [P] GAS §8.1",
        applies=_WIRELESS,
    )
    bandwidth_reduction: float = option(
        1.0, gt=0, doc="divide every rate by κ (any kind); fedasmu §2.5 uses 1, 50, 100 [P]"
    )

    def __post_init__(self) -> None:
        """Reject empty ranges and a cell smaller than its minimum distance, for the kind that reads them.

        Options of a kind not selected are not checked against each other (a sweep may switch kinds on a
        base that sets another kind's options).
        """
        pairs = []
        if self.kind == "uniform":
            pairs.append(("min_uplink_bps", "max_uplink_bps"))
            if self.downlink_to_uplink <= 0:
                pairs.append(("min_downlink_bps", "max_downlink_bps"))
        if self.kind == "wireless":
            pairs.append(("min_distance_m", "radius_m"))
        for low, high in pairs:
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"{low} ({getattr(self, low):g}) exceeds {high} ({getattr(self, high):g})")

    @property
    def client_power_w(self) -> float:
        """The client transmit power in W: ``tx_power_dbm`` when finite, else ``tx_power_w``."""
        if math.isfinite(self.tx_power_dbm):
            return 10.0 ** (self.tx_power_dbm / 10.0) / 1000.0
        return self.tx_power_w

    @property
    def server_power_w(self) -> float:
        """The server transmit power in W: ``server_tx_power_dbm`` when finite, else ``server_tx_power_w``."""
        if math.isfinite(self.server_tx_power_dbm):
            return 10.0 ** (self.server_tx_power_dbm / 10.0) / 1000.0
        return self.server_tx_power_w


@dataclass(frozen=True)
class TimingConfig:
    """How operations are charged in emulated time (DESIGN "The time model"; GAS spec §10.3, §11 row 8).

    By default every charge is measured on the real model and tensors. The GAS reference code instead
    charges hard-coded AlexNet-L2 quantities whatever the data set or split (GAS spec §10.3 [C],
    ``Client.model_process`` / ``transmit_activation`` / ``transmit_model``):

    * each client pass, forward and backward alike, W_c / f_k with W_c = 5,603,328 FLOPs (one image, not
      the batch): ``flops_accounting = "per-sample"`` with ``client_pass_flops = 5603328``;
    * each activation upload B · 131,072 bits / R_k, B the configured batch size (also for an epoch's short
      last batch), labels not counted: ``activation_bits = 131072``;
    * the client-side model upload 620,544 bits / R_k: ``client_model_bits = 620544``;
    * downloads and server compute free: ``free_downloads = true``, ``system.server_flops_per_s = 0``.

    ``"per-sample"`` alone charges one sample's *measured* FLOPs instead, counting 2 FLOPs per multiply-add
    (AlexNet L2: 11,206,656 forward and 20,643,840 backward on 3×32×32 CIFAR-10; 7,676,928 and 14,902,272
    on 1×28×28 Fashion-MNIST), and the measured bytes (float32 activations of the actual batch plus int64
    labels: 16,384 + 8 bytes per sample on CIFAR-10, 12,544 + 8 on Fashion-MNIST; the client-side model
    77,568 and 75,264 bytes). The three constants are read by the ``gas`` method only; a scenario of
    another method that sets them is rejected.
    """

    flops_accounting: str = option(
        "per-batch",
        choices=("per-batch", "per-sample"),
        doc="charge a pass batch_size × FLOPs per sample [P/A], or one sample's FLOPs as the GAS code [C]",
    )
    free_downloads: bool = option(False, doc="downloads take no time, as in the GAS code [C] GAS §10.2")
    message_latency_s: float = option(
        0.0, ge=0, doc="fixed latency added to every upload and download, s [A] cse-fsl §6, fedasmu δ_req"
    )
    client_pass_flops: int = option(
        0,
        ge=0,
        doc="gas only: >0 charges every client forward and backward pass this many FLOPs per sample "
        "instead of the measured ones; GAS code: 5603328 (AlexNet L2, any split/data set) [C] GAS §10.3",
    )
    activation_bits: int = option(
        0,
        ge=0,
        doc="gas only: >0 charges an activation upload train.batch_size × this many bits, labels free, "
        "instead of the measured bytes of the actual batch; GAS code: 131072 (64·8·8·32) [C] GAS §10.3",
    )
    client_model_bits: int = option(
        0,
        ge=0,
        doc="gas only: >0 charges a client-side model transfer this many bits instead of the measured "
        "bytes; GAS code: 620544 (19392 parameters × 32) [C] GAS §10.3",
    )

    def __post_init__(self) -> None:
        """Message sizes are charged in whole bytes."""
        for name in ("activation_bits", "client_model_bits"):
            bits = getattr(self, name)
            if bits % 8:
                raise ValueError(f"{name} = {bits} is not a whole number of bytes; use a multiple of 8 bits")

    def algorithm_problems(self, algorithm: str) -> list[str]:
        """Why these timing rules do not fit method ``algorithm``: only gas reads the constant charges."""
        if algorithm == "gas":
            return []
        return [
            f"system.timing.{name}: {getattr(self, name)} is the GAS code's constant charge, read by "
            f"algorithm 'gas' only (not {algorithm!r}); use 0, the measured FLOPs and bytes"
            for name in CONSTANT_CHARGES
            if getattr(self, name)
        ]


CONSTANT_CHARGES = ("client_pass_flops", "activation_bits", "client_model_bits")


@dataclass(frozen=True)
class SystemConfig:
    """The device model of a run: compute, links, timing rules, server rate and an optional trace file."""

    compute: ComputeConfig = option(factory=ComputeConfig)
    link: LinkConfig = option(factory=LinkConfig)
    timing: TimingConfig = option(factory=TimingConfig)
    server_flops_per_s: float = option(
        0.0,
        ge=0,
        doc="server compute rate of the split methods' server passes, FLOP/s; 0 = server compute is free "
        "[C] GAS §10.2 (the FL methods' aggregation is not timed: they leave it unused)",
    )
    trace_file: str = option(
        "",
        doc="CSV with columns client, flops_per_s, uplink_bps, downlink_bps[, distance_m] (kind=trace); "
        "relative to the scenario file's folder (to the working directory in a key=value override)",
    )

    def __post_init__(self) -> None:
        """A ``trace`` kind needs a trace file."""
        kinds = {"compute.kind": self.compute.kind, "link.kind": self.link.kind}
        uses = [name for name, kind in kinds.items() if kind == "trace"]
        if uses and not self.trace_file:
            raise ValueError(f"{' and '.join(uses)} = 'trace' needs system.trace_file (a CSV path)")
