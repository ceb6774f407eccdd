"""Per-sample costs of a split model that the timing policies need: FLOPs and bytes, measured not assumed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

LABEL_BYTES = 8  # labels travel with the activations as int64


@dataclass(frozen=True)
class SplitCosts:
    """FLOPs per sample of each pass and the bytes each message carries (float32 tensors).

    ``label_bytes`` and ``charged_batch`` keep the measured rule (int64 labels, the actual batch) unless
    :meth:`charged` replaces them with the GAS code's constants.
    """

    client_forward_flops: float
    client_backward_flops: float
    server_forward_flops: float
    server_backward_flops: float  # to the activation and to the parameters
    server_input_grad_flops: float  # to the activation alone (a G_k pass)
    server_weight_grad_flops: float  # to the parameters alone (a step on detached activations)
    activation_bytes: int  # one sample's cut-layer activation (and its gradient)
    client_model_bytes: int  # parameters + buffers of the client-side model
    full_model_bytes: int
    label_bytes: int = LABEL_BYTES  # per sample, uploaded with the activations
    charged_batch: int = 0  # > 0: messages are charged for this many samples whatever the actual batch

    @classmethod
    def from_profile(cls, prof: Any) -> SplitCosts:
        """Build from :class:`raysfl.models.flops.ModelProfile`."""
        return cls(
            client_forward_flops=float(prof.client_forward_flops),
            client_backward_flops=float(prof.client_backward_flops),
            server_forward_flops=float(prof.server_forward_flops),
            server_backward_flops=float(prof.server_backward_flops),
            server_input_grad_flops=float(prof.server_input_grad_flops),
            server_weight_grad_flops=float(prof.server_weight_grad_flops),
            activation_bytes=int(prof.activation_bytes),
            client_model_bytes=int(prof.client_model_bytes + prof.client_buffer_bytes),
            full_model_bytes=int(
                prof.client_model_bytes
                + prof.client_buffer_bytes
                + prof.server_model_bytes
                + prof.server_buffer_bytes
            ),
        )

    def charged(self, timing: Any, batch_size: int) -> SplitCosts:
        """These costs with the constant charges of ``system.timing`` in place of the measured ones.

        The GAS code's clock (GAS spec §10.3 [C]): ``client_pass_flops`` > 0 becomes the cost of every client
        forward and backward pass (``Client.model_process`` charges W_c / f_k for each); ``activation_bits``
        > 0 makes an activation message ``batch_size`` × bits (``transmit_activation``: bits × the configured
        B, also for a short last batch) with no labels, and its gradient the same size;
        ``client_model_bits`` > 0 becomes the size of the client-side model (``transmit_model``). Server
        FLOPs stay measured. With no constant set, the costs are returned unchanged.

        Args:
            timing: the scenario's :class:`raysfl.system.config.TimingConfig`.
            batch_size: B, ``train.batch_size``.
        """
        out = self
        if timing.client_pass_flops > 0:
            flops = float(timing.client_pass_flops)
            out = replace(out, client_forward_flops=flops, client_backward_flops=flops)
        if timing.activation_bits > 0:
            per_sample = timing.activation_bits // 8
            out = replace(out, activation_bytes=per_sample, label_bytes=0, charged_batch=batch_size)
        if timing.client_model_bits > 0:
            out = replace(out, client_model_bytes=timing.client_model_bits // 8)
        return out

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle (a checkpoint), filling in what older checkpoints lack.

        Costs saved before the one-gradient counts existed keep the full backward they were charging, so a
        resumed run is timed as it started.
        """
        for name in ("server_input_grad_flops", "server_weight_grad_flops"):
            state.setdefault(name, state["server_backward_flops"])
        self.__dict__.update(state)

    @property
    def gradient_pass_flops(self) -> float:
        """Per sample, the server's G_k pass: forward, then the backward to the activation alone."""
        return self.server_forward_flops + self.server_input_grad_flops

    @property
    def update_pass_flops(self) -> float:
        """Per sample, a server step on detached activations: forward, then the backward to the weights."""
        return self.server_forward_flops + self.server_weight_grad_flops

    def _samples(self, batch: int) -> int:
        return self.charged_batch if self.charged_batch > 0 else batch

    def upload_bytes(self, batch: int) -> int:
        """Activations plus labels of a minibatch of ``batch`` samples."""
        return self._samples(batch) * (self.activation_bytes + self.label_bytes)

    def gradient_bytes(self, batch: int) -> int:
        """The gradient w.r.t. the activations of a minibatch, sent back to the client."""
        return self._samples(batch) * self.activation_bytes
