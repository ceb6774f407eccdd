"""A warning when a run's test loss becomes NaN or infinite: the model diverged, and the run goes on."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any


def diverged(row: Mapping[str, Any]) -> bool:
    """Whether an evaluation row's test loss is NaN or infinite (a row without a loss has not diverged)."""
    loss = row.get("loss")
    return loss is not None and not math.isfinite(float(loss))


class DivergenceNotice:
    """A sink that warns once, at the first evaluation whose test loss is not finite.

    From there on every evaluation is of the broken model (its accuracy at chance or below), while the run
    spends its whole budget; without the warning only its numbers would say so. ``raysfl report`` names such
    runs too (:func:`raysfl.report.runs.diverged_at`).
    """

    def __init__(self) -> None:
        self.warned = False

    def resume(self, state: Any, evals: list[dict[str, Any]]) -> None:
        """A resumed run (or a restarted attempt) warns again if it diverged before its checkpoint."""
        self.warned = False
        for row in evals:
            self.on_eval(row)

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Events say nothing about the loss."""

    def on_eval(self, row: dict[str, Any]) -> None:
        """Warn if this evaluation's test loss is NaN or infinite and no earlier one was."""
        if self.warned or not diverged(row):
            return
        self.warned = True
        warnings.warn(
            f"the test loss is {float(row['loss'])} at global iteration {row.get('iteration')}: the model "
            "diverged, and the run goes on with it "
            "(a smaller train.lr, or train.clip_grad_norm, can prevent it)",
            stacklevel=2,
        )

    def close(self) -> None:
        """Nothing to close."""
