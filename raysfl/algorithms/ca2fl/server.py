"""CA2FL server: cached update calibration (Wang et al., ICLR 2024, Algorithm 1).

State: the latest update h_i of every client i (h_i = 0 until i first reports), their mean
h̄ = (1/N)·Σ_{i=1..N} h_i over all N = K registered clients, and the running calibration of the current
buffer. Per arrival of Δ_i (i ∈ S_t):

    c ← c + (Δ_i − h_i)      then      h_i ← Δ_i

and when |S_t| = M arrivals are in:

    v_t = h̄_t + c / M,       w ← w + η·v_t,       h̄_{t+1} = h̄_t + c / N,       c ← 0

which is v_t = h̄_t + (1/M)·Σ_{i∈S_t}(Δ_i − h_i^t) with h̄_t the cache mean before this buffer's updates.
A client that reports twice within one buffer contributes Δ_new − Δ_old the second time (its cache entry
already holds the first update), so the sum telescopes to Δ_latest − h_i^t for it [A].

Caches are stored as float32 (one full model per client); c and h̄ are float64.
"""

from __future__ import annotations

from typing import Any

import torch

from raysfl.algorithms.common.fl_server import Arrival, Delta, FLServer, add_scaled, zeros_delta


class CA2FLServer(FLServer):
    """Cached update calibration; ``mode = "code"`` is the GAS code's |D_i|-weighted sum of all caches."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache: dict[int, dict[str, torch.Tensor]] = {}
        self.h_mean: Delta = zeros_delta(self.global_weights)
        self.calibration: Delta = zeros_delta(self.global_weights)
        self.count = 0

    def _receive(self, arrival: Arrival) -> None:
        """Cache h_i ← Δ_i (accumulating Δ_i − h_i^old in paper mode); flush after M arrivals."""
        new = {k: v.to(torch.float32) for k, v in arrival.delta().items()}
        old = self.cache.get(arrival.client)
        if self.p.mode == "paper":
            for key, value in new.items():
                self.calibration[key] += value.to(torch.float64)
                if old is not None:
                    self.calibration[key] -= old[key].to(torch.float64)
        self.cache[arrival.client] = new
        self.count += 1
        if self.count == self.p.buffer_size:
            self._flush()

    def _flush(self) -> None:
        if self.p.mode == "paper":
            m, n = float(self.count), float(self.setup.num_clients)
            v = {k: self.h_mean[k] + self.calibration[k] / m for k in self.h_mean}
            self._commit(add_scaled(self.global_weights, [(self.p.server_lr, v)]))
            for key in self.h_mean:
                self.h_mean[key] += self.calibration[key] / n
            self.calibration = zeros_delta(self.global_weights)
        else:
            total = float(sum(self.setup.client_size(i) for i in range(self.setup.num_clients)))
            terms = [(self.setup.client_size(i) / total, self.cache[i]) for i in sorted(self.cache)]
            self._commit(add_scaled(self.global_weights, terms))
        self.count = 0

    def mean_cache(self) -> Delta:
        """h̄ recomputed from the caches: (1/N)·Σ_i h_i in float64 (clients never heard from count as 0)."""
        out = zeros_delta(self.global_weights)
        for h in self.cache.values():
            for key in out:
                out[key] += h[key].to(torch.float64)
        return {k: v / self.setup.num_clients for k, v in out.items()}

    def _counters(self) -> dict[str, Any]:
        return {"cached_clients": len(self.cache)}
