"""Action blocks the virtual-time policies share: evaluate, end an iteration, log a start, end a split job.

Plain functions of plain values; each returns its actions in the exact order the policies emit them, since
the event order, the slot names, the report rows and the checkpoints depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Log, Report, Schedule, Slot, Stop
from raysfl.algorithms.protocols import ServerLogic

if TYPE_CHECKING:
    import torch

    from raysfl.algorithms.config import TrainConfig


class SplitFinisher(Protocol):
    """A split client that ends its job on the server's gradients (GAS, MiniBatch-SFL, the gradient FSLs)."""

    def finish(self, state: Any, grads: torch.Tensor) -> dict[str, torch.Tensor]:
        """Back-propagate ``grads`` through the client-side model, step, and return its weights."""
        ...


def evaluate(iteration: int, t: float, info: Mapping[str, Any] | None = None) -> list[Action]:
    """Evaluate the server's current model now, reported as global iteration ``iteration`` at time ``t``.

    The result goes to the slot ``("eval", iteration)``; the report row holds ``iteration``, ``t`` and then
    the method's own numbers ``info``.
    """
    slot = Slot(("eval", iteration))
    row = {"iteration": iteration, "t": t, **(info or {})}
    return [Call(SERVER, ServerLogic.evaluate, out=slot), Report(slot, row)]


def out_of_time(t: float, train: TrainConfig) -> bool:
    """Whether emulated time ``t`` has reached ``train.max_emulated_s`` (0: no limit)."""
    return 0 < train.max_emulated_s <= t


def eval_slot(t: float, train: TrainConfig) -> int:
    """The cell ⌊t / eval_every_s⌋ of the evaluation time grid that emulated time ``t`` falls in (0: no grid).

    A policy keeps the cell of its latest global iteration (``eval_slot``, 0 at the start, where the initial
    model is evaluated) and passes it to :func:`eval_due`; since time never runs backwards, storing
    ``eval_slot(t)`` after every global iteration keeps the cell of the latest evaluation.
    """
    return int(t // train.eval_every_s) if train.eval_every_s > 0 else 0


def eval_due(iteration: int, t: float, train: TrainConfig, last_slot: int) -> bool:
    """Whether the global iteration ``iteration`` ending at ``t`` is evaluated (besides the last one).

    With ``train.eval_every_s > 0``: when ``t`` lies in a later grid cell than ``last_slot``, the cell of the
    previous global iteration (so one evaluation per cell, at its first iteration; cells no iteration ends
    in are skipped). Otherwise every ``train.eval_every``-th iteration.

        >>> from raysfl.algorithms.config import TrainConfig
        >>> grid = TrainConfig(eval_every_s=30.0)
        >>> [eval_due(i, t, grid, eval_slot(prev, grid)) for i, t, prev in [(1, 29.0, 0.0), (2, 31.0, 29.0),
        ...                                                             (3, 59.0, 31.0), (4, 95.0, 59.0)]]
        [False, True, False, True]
    """
    if train.eval_every_s > 0:
        return eval_slot(t, train) > last_slot
    return iteration % train.eval_every == 0


def after_update(
    iteration: int,
    t: float,
    train: TrainConfig,
    info: Callable[[], Mapping[str, Any]] | None = None,
    last_slot: int = 0,
) -> tuple[list[Action], bool]:
    """Global iteration ``iteration`` has just completed at ``t``: evaluate when due, stop at the budget.

    Evaluates (:func:`evaluate`) after the last iteration (``train.global_iterations``), once out of
    emulated time (:func:`out_of_time`) and when :func:`eval_due` (every ``train.eval_every``-th iteration,
    or on the ``train.eval_every_s`` time grid, where ``last_slot`` is the grid cell of the previous
    iteration); in the first two cases ``Stop("budget reached")`` follows. ``info`` gives the report's extra
    numbers and is called only when the model is evaluated (it may reset a since-last-report window).
    Returns the actions and whether the run stops (the actions then end with the ``Stop``).
    """
    last = iteration >= train.global_iterations
    stop = last or out_of_time(t, train)
    actions: list[Action] = []
    if stop or eval_due(iteration, t, train, last_slot):
        actions += evaluate(iteration, t, None if info is None else info())
    if stop:
        actions.append(Stop("budget reached"))
    return actions, stop


def start_log(t: float, client: int, bytes_down: int, version: int) -> Log:
    """The event-log row of a job that starts at ``t``: the model download of ``client`` at ``version``."""
    return Log({"t": t, "kind": "start", "client": client, "bytes_down": bytes_down, "version": version})


def finish_job(client: int, grads: Slot, done: float, t_model: float) -> list[Action]:
    """A split client's last step: apply the server's gradients ``grads`` and upload its client-side model.

    The call starts when the server's step is ``done`` and is paced to end when the model arrives at
    ``t_model``; the ``model`` event then waits for the slot ``("model", client)``.
    """
    out = Slot(("model", client))
    return [
        Call(CLIENT, SplitFinisher.finish, (grads,), client=client, out=out, pace_s=t_model - done),
        Schedule(t_model, "model", client, {"awaits": ("model", client)}),
    ]
