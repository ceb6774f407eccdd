"""What both actor shells share: profiling control (``benchmarks/profile_*.py``)."""

from __future__ import annotations

from typing import Any

import ray

from raysfl.engine.hosts import profile_control


class Profiled:
    """Base of the actor shells: ``profile("start")`` in the actor, ``profile("report")`` what it measured."""

    def profile(self, action: str, lane: str = "") -> dict[str, Any] | None:
        """Profiling (``benchmarks/profile_*.py``): ``"start"`` it here, or ``"report"`` what it measured.

        The report names the Ray worker, whose task timeline holds this actor's argument and result
        (de)serialisation.
        """
        out = profile_control(action, lane)
        if out is not None:
            out["worker_id"] = ray.get_runtime_context().get_worker_id()
        return out
