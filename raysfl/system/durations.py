"""Operation durations in emulated seconds, from FLOPs and bytes (DESIGN "The time model").

    compute  = samples · FLOPs_per_sample / f_k          forward or backward on client k
    upload   = latency + 8·nbytes / R_k^up
    download = latency + 8·nbytes / R_k^dn               (0 with ``free_downloads``, GAS code [C])
    server   = samples · FLOPs_per_sample / f_server     (0 when f_server = 0, GAS code [C])

``samples`` is the batch size (``flops_accounting = "per-batch"``) or 1 (``"per-sample"``: one image's
FLOPs per pass, as the GAS code charges, GAS spec §10.3 [C], §11 row 8). The FLOPs and bytes are whatever
the caller passes: the measured ones of the real model and tensors (forward and backward as measured;
nothing here assumes backward = 2 × forward), so ``"per-sample"`` alone is the code's *rule* with measured
quantities, not the code's numbers. The code charges hard-coded constants (W_c = 5,603,328 FLOPs for
forward and backward alike, 131,072 bits per activation sample × B, 620,544 bits per model); GAS swaps them
in from ``timing.client_pass_flops``, ``activation_bits`` and ``client_model_bits``
(:meth:`raysfl.algorithms.common.costs.SplitCosts.charged`).

Example, the GAS code's per-iteration time Δt = 2·W_c/f_k + B·S_act/R_k with its constants (GAS spec §10.3):
    >>> import numpy as np
    >>> from raysfl.system.config import TimingConfig
    >>> from raysfl.system.table import DeviceTable
    >>> dev = DeviceTable(np.array([5e9]), np.array([4.194304e7]), np.array([1e8]))
    >>> tm = TimeModel(dev, TimingConfig(flops_accounting="per-sample", free_downloads=True), 0.0)
    >>> round(2 * tm.compute_s(0, 5_603_328, 32) + tm.upload_s(0, 32 * 131_072 // 8), 10)
    0.1022413312
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.system.config import SystemConfig, TimingConfig
from raysfl.system.table import DeviceTable

BITS_PER_BYTE = 8


@dataclass(frozen=True)
class TimeModel:
    """Durations of client, link and server operations for one run's device table.

    Attributes:
        devices: the per-client compute and link rates.
        timing: the accounting rules (per-batch vs per-sample FLOPs, free downloads, message latency).
        server_flops_per_s: the server's compute rate; 0 makes server compute free (GAS code [C]).

    All methods return float seconds and raise ``ValueError`` on a negative size or a batch below 1, and
    ``IndexError`` on a client id outside 0..K-1.
    """

    devices: DeviceTable
    timing: TimingConfig
    server_flops_per_s: float = 0.0

    def __post_init__(self) -> None:
        """Check the server rate."""
        if not self.server_flops_per_s >= 0:
            raise ValueError(f"server_flops_per_s must be >= 0, got {self.server_flops_per_s!r}")

    @classmethod
    def from_config(cls, devices: DeviceTable, cfg: SystemConfig) -> TimeModel:
        """The time model of a scenario's ``system`` section over a drawn device table."""
        return cls(devices=devices, timing=cfg.timing, server_flops_per_s=cfg.server_flops_per_s)

    def samples_charged(self, batch_size: int) -> int:
        """How many samples one pass over a batch is charged for: ``batch_size``, or 1 in per-sample mode."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return 1 if self.timing.flops_accounting == "per-sample" else batch_size

    def _client(self, client: int) -> int:
        if not 0 <= client < len(self.devices):
            raise IndexError(f"client {client} is outside 0..{len(self.devices) - 1}")
        return client

    def compute_s(self, client: int, flops_per_sample: float, batch_size: int) -> float:
        """Time for client ``client`` to run a pass costing ``flops_per_sample`` per sample over a batch.

        GAS spec §10.3: W_c / f_k per pass in per-sample mode (the code's rule [C]; its W_c is a constant,
        see the module docstring); B·W_c / f_k per batch [P/A].
        """
        if flops_per_sample < 0:
            raise ValueError(f"flops_per_sample must be >= 0, got {flops_per_sample!r}")
        f = float(self.devices.flops_per_s[self._client(client)])
        return self.samples_charged(batch_size) * flops_per_sample / f

    def upload_s(self, client: int, nbytes: float) -> float:
        """Time to send ``nbytes`` from client ``client`` to the server: latency + 8·nbytes / R_k^up."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
        rate_bps = float(self.devices.uplink_bps[self._client(client)])
        return self.timing.message_latency_s + BITS_PER_BYTE * nbytes / rate_bps

    def download_s(self, client: int, nbytes: float) -> float:
        """Time to send ``nbytes`` from the server to client ``client``; 0 with ``free_downloads`` [C]."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
        rate_bps = float(self.devices.downlink_bps[self._client(client)])
        if self.timing.free_downloads:
            return 0.0
        return self.timing.message_latency_s + BITS_PER_BYTE * nbytes / rate_bps

    def server_s(self, flops_per_sample: float, batch_size: int) -> float:
        """Server time for a pass of ``flops_per_sample`` per sample over a batch; 0 if the server rate is 0.

        The same per-batch / per-sample accounting as :meth:`compute_s` applies. For a server pass over
        several clients' activations, pass the concatenated batch size.
        """
        if flops_per_sample < 0:
            raise ValueError(f"flops_per_sample must be >= 0, got {flops_per_sample!r}")
        samples = self.samples_charged(batch_size)
        if self.server_flops_per_s == 0:
            return 0.0
        return samples * flops_per_sample / self.server_flops_per_s
