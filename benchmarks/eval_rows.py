"""How many test rows a CPU evaluation should push through the model at once (issue 17).

For every zoo model at the input shape its scenarios use, times raysfl's test-set evaluation
(:func:`raysfl.algorithms.common.evaluate.evaluate_split`, batches of ``train.eval_batch_size`` = 512)
with each batch's forward run whole and run ``rows`` rows at a time, and checks that the chunked logits
equal the whole-batch logits bit for bit (else: the largest difference relative to the largest logit,
and how many predicted classes changed). Random weights and random images of the dataset's shape (the
time of a forward does not depend on the values). Prints a markdown table: seconds per 10,000 test images
(best of ``--repeats``), the speed-up of :data:`~raysfl.algorithms.common.evaluate.CPU_FORWARD_ROWS`
against the whole batch, and the fastest of the swept sizes.

Usage:
    python benchmarks/eval_rows.py [--threads 2] [--repeats 2] [--rows 32 64 128 256] [--models alexnet ...]
"""

from __future__ import annotations

import argparse
import time

import torch

from raysfl.algorithms.common import evaluate
from raysfl.engine.provenance import processor_name
from raysfl.models import ModelConfig, SplitModel, build_split_model

BATCH = 512
# (model, options, in_channels, image size, test images timed): the shapes of the scenarios that use them
CASES: list[tuple[str, dict[str, object], int, int, int]] = [
    ("alexnet", {}, 1, 28, 4096),
    ("lenet5", {}, 1, 28, 8192),
    ("fedasmu_cnn", {}, 3, 32, 4096),
    ("cse_fsl_femnist", {}, 1, 28, 4096),
    ("cse_fsl_cifar10", {}, 3, 32, 2048),
    ("resnet20", {}, 3, 32, 1024),
    ("vgg11", {}, 3, 32, 1024),
    ("vgg19", {"vgg19_width_divisor": 4}, 3, 32, 1024),
    ("resnet18", {}, 3, 32, 512),
    ("vgg16_bn", {}, 3, 32, 512),
    ("vit_small", {}, 3, 32, 512),
]


def logits(model: SplitModel, x: torch.Tensor) -> torch.Tensor:
    """All logits, with the evaluation's own chunking (:data:`evaluate.CPU_FORWARD_ROWS`)."""
    with torch.no_grad():
        out = [
            evaluate.chunked_logits(
                model.client, model.server, None, x[s : s + BATCH], evaluate.forward_rows(x, BATCH)
            )[0]
            for s in range(0, len(x), BATCH)
        ]
    return torch.cat(out)


def seconds(model: SplitModel, x: torch.Tensor, y: torch.Tensor, rows: int, repeats: int) -> float:
    """Best wall time of ``evaluate_split`` over ``x`` with ``rows`` rows per forward pass."""
    evaluate.CPU_FORWARD_ROWS = rows
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        evaluate.evaluate_split(model.client, model.server, x, y, BATCH)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the server's default: 2)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rows", type=int, nargs="+", default=[32, 64, 128, 256], help="chunk sizes swept")
    ap.add_argument("--models", nargs="+", default=[c[0] for c in CASES])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the timed image counts (CI: small)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    default = evaluate.CPU_FORWARD_ROWS
    print(
        f"{processor_name()} ({torch.backends.cpu.get_cpu_capability()}), torch {torch.__version__}, "
        f"{args.threads} threads, "
        f"batches of {BATCH}, CPU_FORWARD_ROWS = {default}\n"
    )
    swept = sorted(set(args.rows) | {default})
    print(
        "| model | input | images | s / 10k, whole batch | s / 10k, "
        f"{default} rows | speed-up | fastest swept (s / 10k) | logits bitwise equal |"
    )
    print("|---|---|---:|---:|---:|---:|---|---|")
    for name, options, channels, size, images in CASES:
        if name not in args.models:
            continue
        n = max(BATCH, int(images * args.scale))
        model = build_split_model(ModelConfig(name=name, **options), channels, size, 10, seed=0)
        model.client.eval()  # as evaluate_split_aux does: dropout off, batch norm on its running statistics
        model.server.eval()
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(n, channels, size, size, generator=gen)
        y = torch.randint(0, 10, (n,), generator=gen)
        evaluate.CPU_FORWARD_ROWS = BATCH
        whole = logits(model, x)
        worst = 0.0  # largest |chunked - whole| over the swept sizes, relative to the largest |logit|
        flips = 0  # test rows whose predicted class changes
        for rows in swept:
            evaluate.CPU_FORWARD_ROWS = rows
            chunked = logits(model, x)
            worst = max(worst, float((chunked - whole).abs().max() / whole.abs().max()))
            flips = max(flips, int((chunked.argmax(1) != whole.argmax(1)).sum()))
        same = "yes" if worst == 0.0 else f"no: {worst:.1e}, {flips} predictions changed"
        seconds(model, x, y, default, 1)  # warm-up: oneDNN builds its kernels on first use
        per_10k = 10_000 / n
        whole_s = seconds(model, x, y, BATCH, args.repeats) * per_10k
        times = {rows: seconds(model, x, y, rows, args.repeats) * per_10k for rows in swept}
        best = min(times, key=times.__getitem__)
        print(
            f"| {name} | {channels}x{size}x{size} | {n} | {whole_s:.2f} | {times[default]:.2f} | "
            f"{whole_s / times[default]:.2f}x | {best} ({times[best]:.2f}) | {same} |",
            flush=True,
        )
    evaluate.CPU_FORWARD_ROWS = default


if __name__ == "__main__":
    main()
