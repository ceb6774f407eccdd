"""The local backend's copies of call values: :func:`raysfl.engine.copies.as_sent` against pickling.

The local backend hands every call's arguments and result over as copies, as Ray's serialisation does
(:mod:`raysfl.engine.copies`). Until 2026-11-27 each copy was a pickle round trip; trees of containers,
CPU tensors and arrays are now copied directly, with the same result
(``tests/unit/engine/test_local_copies.py``). This times both, best of ``--repeats``, on the values
raysfl's methods send: a model's state dict (an FL upload or download), a GAS client's activations with
labels, and its returned gradient.

Usage::

    python benchmarks/local_copies.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import pickle
import time
from collections.abc import Callable
from typing import Any

import torch

from raysfl.engine.copies import as_sent
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import build_split_model


def pickle_round_trip(value: Any) -> Any:
    """The copy the local backend made before: pickled and unpickled."""
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def best_us(copy: Callable[[Any], Any], value: Any, repeats: int) -> float:
    """The fastest of ``repeats`` copies of ``value``, in microseconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        copy(value)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def cases() -> list[tuple[str, Any]]:
    """(name, value) of what a call sends: uploads of two models, a GAS job's activations and gradient."""
    lenet = build_split_model(ModelConfig(name="lenet5"), 1, 28, 10, seed=0)
    alexnet = build_split_model(ModelConfig(name="alexnet"), 1, 28, 10, seed=0)
    full_lenet = {**lenet.client.state_dict(), **lenet.server.state_dict()}
    full_alexnet = {**alexnet.client.state_dict(), **alexnet.server.state_dict()}
    acts = torch.randn(32, *alexnet.activation_shape)
    return [
        ("LeNet-5 state dict (FL upload)", {"weights": full_lenet, "num_samples": 600}),
        ("AlexNet state dict (FL upload)", {"weights": full_alexnet, "num_samples": 600}),
        ("AlexNet L2 activations + labels (B = 32)", (acts, torch.randint(0, 10, (32,)))),
        ("AlexNet L2 activation gradient (B = 32)", acts.clone()),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| value | MB | pickle round trip (µs) | as_sent (µs) | faster |")
    print("|---|---:|---:|---:|---:|")
    for name, value in cases():
        mb = len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)) / 1e6
        old, new = best_us(pickle_round_trip, value, args.repeats), best_us(as_sent, value, args.repeats)
        print(f"| {name} | {mb:.2f} | {old:.0f} | {new:.0f} | {old / new:.1f}× |")


if __name__ == "__main__":
    main()
