"""PORT's urgent requests to stale clients (Su & Li, IWQoS 2022; Plato ``request_update`` [C]).

An aggregation that is due (``buffer_size`` updates buffered) but held by the staleness bound b — a job
still running on a model more than b versions old — does not wait for that job to finish: the server sends
each such job an urgent request, and the client reports the model it holds at that time, i.e. after the
local steps it has completed (Plato's client returns its model as of the request's simulated time [C]). The
report leaves at the request time, or at the end of its first step when none is complete yet [A] (so no
empty update is sent), and arrives an upload time later; the held aggregation then proceeds. The jobs are
*deferred* (:class:`~raysfl.algorithms.common.fl_policy.FLPolicy`): trained only when their model is due,
with the number of steps known by then. The client's data cursor and the policy's minibatch counter advance
only by the steps run.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from raysfl.algorithms.actions import Action, Log, Schedule
from raysfl.algorithms.common.fl_policy import FLPolicy


class PORTPolicy(FLPolicy):
    """The FL policy with PORT's bound (``hold_above``) and, when ``request_update``, urgent requests.

    Args:
        *args: as :class:`FLPolicy`.
        request_update: send urgent requests to the jobs that hold an aggregation back [C].
        **kwargs: as :class:`FLPolicy` (``hold_above`` = b, ``server_flush`` = True).
    """

    def __init__(self, *args: Any, request_update: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deferred = request_update
        self.requests = 0  # urgent requests sent so far

    def _on_hold(self, t: float) -> list[Action]:
        """Ask every job past the staleness bound that was not asked yet to report its model now."""
        if not self.deferred or self.hold_above is None:
            return []
        actions: list[Action] = []
        for k in sorted(self.active):
            job = self.active[k]
            full = len(job.ends)
            if not self._past_bound(job) or job.steps is not None and job.steps < full:
                continue  # not past the bound, or already asked
            done = max(1, bisect_right(job.ends, t))
            if done >= full:
                continue  # it finishes its last step before the request reaches it: its model is on the way
            leave = max(t, job.ends[done - 1])
            self.steps[k] -= full - done  # the client draws only the minibatches of the steps it ran
            job.steps, job.token = done, self.serial
            self.serial += 1
            self.requests += 1
            arrive = leave + self.time.upload_s(k, self.costs.model_bytes)
            actions += [
                Schedule(arrive, "model", k, {"job": job.token}),
                Log({"t": t, "kind": "request", "client": k, "e": done, "version": self.version}),
            ]
        return actions
