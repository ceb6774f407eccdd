"""``torch.compile`` on the CPU hot paths: one training step of the zoo's AlexNet, eager against compiled.

Issue 17 asks for every CPU speed-up the profile leaves; compiling the model with TorchInductor (its C++
code generation fuses the element-wise layers) is one a reader would ask about. This script times the two
training steps issue 17's benchmarks spend their time in, with the models the zoo builds for a run:

* **client step** (FedAvg's, as in the Flower peer benchmark): the whole model (``fedavg_peer.toml``:
  AlexNet at L2 on 1×28×28 Fashion-MNIST inputs) on a batch of 32, cross-entropy, backward, SGD with
  momentum and weight decay, on one thread (a pool's ``engine.torch_threads``);
* **server update** (GAS eq. (5)): the server part on a buffer plus generated activations (576 × 64×7×7), on
  two threads (``engine.server_threads``).

Each in four forms: eager (what a run does with ``engine.memory_format = "contiguous"``), eager
channels-last (``"channels_last"``), ``torch.compile(model)`` on the contiguous model and on the channels-last
one (the default mode, which needs a C++ compiler; Inductor's caches are off, so each compiled form compiles
from nothing, as a fresh run's would). A row gives the first step (for the compiled forms: the
compilation) and the best of ``--repeats`` timed steps after three warm-up steps. The random inputs are
fixed; only time is measured, not values (compilation fuses operations, so its results differ in the last
bits, as channels-last ones do).

Usage::

    python benchmarks/torch_compile.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # each compiled form compiles from nothing

import torch  # noqa: E402  (after the cache setting, which Inductor reads at import)
import torch.nn.functional as F  # noqa: E402
from _layer_timing import best_ms  # noqa: E402
from torch import nn  # noqa: E402

from raysfl.models.config import ModelConfig  # noqa: E402
from raysfl.models.zoo import build_split_model  # noqa: E402

FORMS = ("eager", "eager, channels-last", "compiled", "compiled, channels-last")


def alexnet_parts() -> tuple[nn.Module, nn.Module]:
    """The full model and the server part of ``fedavg_peer.toml``'s AlexNet at L2 (Fashion-MNIST shapes)."""
    split = build_split_model(ModelConfig(name="alexnet", split="L2"), 1, 28, 10, seed=2023)
    return split.full(), split.server


def training_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """One SGD step (lr 0.01, momentum 0.9, weight decay 5e-4: the peer benchmark's optimizer) on (x, y)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def in_form(model: nn.Module, form: str) -> nn.Module:
    """``model`` as one of :data:`FORMS` (a fresh copy of its parameters' layout)."""
    if "channels-last" in form:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # not in the stub
    return torch.compile(model) if form.startswith("compiled") else model  # type: ignore[return-value]


def time_forms(
    label: str, make: Callable[[], nn.Module], x: torch.Tensor, y: torch.Tensor, threads: int, repeats: int
) -> None:
    """Print one table row per form: first step (s) and best step (ms), with the ratio to eager."""
    torch.set_num_threads(threads)
    eager_ms = 0.0
    for form in FORMS:
        torch.manual_seed(0)
        torch._dynamo.reset()
        step = training_step(in_form(make(), form), x, y)
        t = time.perf_counter()
        step()
        first_s = time.perf_counter() - t
        for _ in range(3):
            step()
        ms = best_ms(step, repeats)
        eager_ms = eager_ms or ms
        cells = f"{first_s:.2f} | {ms:.1f} | {eager_ms / ms:.2f}"
        print(f"| {label} | {threads} | {form} | {cells} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")  # the cache setting's own notice
    print(f"torch {torch.__version__}, best of {args.repeats} timed steps after 3 warm-up steps")
    print("\n| step | threads | form | first step (s) | step (ms) | × eager |")
    print("|---|---:|---|---:|---:|---:|")
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 1, 28, 28, generator=g), torch.randint(0, 10, (32,), generator=g)
    time_forms("client step, batch 32", lambda: alexnet_parts()[0], x, y, 1, args.repeats)
    a, ya = torch.randn(576, 64, 7, 7, generator=g), torch.randint(0, 10, (576,), generator=g)
    time_forms("server update, batch 576", lambda: alexnet_parts()[1], a, ya, 2, args.repeats)


if __name__ == "__main__":
    main()
