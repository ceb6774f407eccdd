"""MOON's emulated time: FedAvg's, optionally charging the two frozen forward passes of each step.

A MOON step runs the trained model forward and backward, then the received global model and the device's
previous local model forward (frozen, no gradient) to compare representations (Li et al., eq. (2)). The
frozen models run all their layers (``representation_and_logits``), so a step computes
F + B + 2·F FLOPs per sample against FedAvg's F + B. A device's first job has no previous model and trains
on the cross-entropy alone, as does μ = 0: neither runs the frozen passes, so neither is charged for them.

By default the frozen passes are not charged [A] (FedASMU's Table 4 gives MOON exactly FedAvg's times to
target in four settings and FedProx's in a fifth; docs/algorithms/moon.md); ``charge_frozen_passes``
charges them.
"""

from __future__ import annotations

from typing import Any

from raysfl.algorithms.common.fl_policy import FLPolicy


class MOONPolicy(FLPolicy):
    """The synchronous FL policy; a step of a device with a previous model may cost F + B + 2·F.

    Args:
        *args: as :class:`FLPolicy`.
        charge_frozen_passes: charge the two frozen forward passes of the steps that run them.
        **kwargs: as :class:`FLPolicy`.
    """

    def __init__(self, *args: Any, charge_frozen_passes: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.charge_frozen_passes = charge_frozen_passes

    def _step_flops(self, k: int) -> float:
        """F + B, plus 2·F when client k's job that starts now runs the frozen passes and they are charged.

        A job runs them when the device trained before (``starts[k] > 0``: its previous model is kept in
        its client state) and μ > 0 (the policy is built only with μ > 0 when charging).
        """
        flops = super()._step_flops(k)
        if self.charge_frozen_passes and self.starts[k] > 0:
            flops += 2.0 * self.costs.forward_flops
        return flops
