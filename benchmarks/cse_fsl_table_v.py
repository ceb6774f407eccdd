"""CSE-FSL paper, Table V: communication loads (GiB) and server storage (M parameters), ours vs the paper.

The loads come from raysfl's accounting functions (`raysfl/algorithms/common/fsl_accounting.py`), fed with
the zoo nets' own sizes and Table V's configuration (5 clients; CIFAR-10: 10,000 images each, B = 50,
200 epochs; F-EMNIST: 209 samples each, B = 10, 500 epochs). The engine counts the bytes of the tensors it
actually sends; `tests/unit/algorithms/test_cse_fsl_runs.py` checks that those counts equal these functions.

Usage: python benchmarks/cse_fsl_table_v.py   (prints a markdown table)
"""

from __future__ import annotations

import math

import torch

from raysfl.algorithms.common.fsl_accounting import storage_params, table_v_load_gib
from raysfl.algorithms.cse_fsl import (
    CSEFSLParams,
    FSLANParams,
    SplitFedV1Params,
    SplitFedV2Params,
    cse_fsl_rules,
    fsl_an_rules,
    splitfed_v1_rules,
    splitfed_v2_rules,
)
from raysfl.models.config import ModelConfig
from raysfl.models.flops import count_params
from raysfl.models.zoo import build_split_model

PAPER = {  # [P] Table V: (CIFAR-10 load GB, F-EMNIST load GB, CIFAR-10 storage M, F-EMNIST storage M)
    "FSL_MC": (172.46, 36.23, 5.34, 6.03),
    "FSL_OC": (172.46, 36.23, 1.50, 1.28),
    "FSL_AN": (86.80, 28.16, 5.46, 8.89),
    "CSE_FSL h=2": (None, 19.58, None, None),
    "CSE_FSL h=4": (None, 15.29, None, None),
    "CSE_FSL h=5": (18.14, 14.43, 1.61, 4.14),
    "CSE_FSL h=10": (9.55, None, None, None),
    "CSE_FSL h=25": (4.40, None, None, None),
    "CSE_FSL h=50": (2.69, None, None, None),
}


def sizes(name: str, channels: int, size: int, classes: int) -> tuple[int, int, int, int]:
    """(client params, server params, aux params, activation numel) of a zoo net, built on the meta device."""
    with torch.device("meta"):
        m = build_split_model(ModelConfig(name=name, aux="mlp"), channels, size, classes, seed=0)
    return count_params(m.client), count_params(m.server), count_params(m.aux), math.prod(m.activation_shape)


def main() -> None:
    """Print ours vs the paper."""
    cifar = sizes("cse_fsl_cifar10", 3, 24, 10)
    femnist = sizes("cse_fsl_femnist", 1, 28, 62)
    rules = {
        "FSL_MC": (splitfed_v1_rules(SplitFedV1Params()),) * 2,
        "FSL_OC": (splitfed_v2_rules(SplitFedV2Params()),) * 2,
        # F-EMNIST's FSL_AN load matches only when the last partial batch is dropped (specs/cse-fsl.md §3.3)
        "FSL_AN": (fsl_an_rules(FSLANParams()), fsl_an_rules(FSLANParams(drop_last=True))),
        **{f"CSE_FSL h={h}": (cse_fsl_rules(CSEFSLParams(h=h)),) * 2 for h in (2, 4, 5, 10, 25, 50)},
    }
    print(
        "| method | CIFAR-10 load GiB (paper) | F-EMNIST load GiB (paper) | CIFAR-10 storage M (paper) "
        "| F-EMNIST storage M (paper) |"
    )
    print("|---|---|---|---|---|")
    for name, (r_cifar, r_femnist) in rules.items():
        paper = PAPER[name]
        pc, ps, pa, q = cifar
        load_c = table_v_load_gib(r_cifar, [10_000] * 5, 50, q, pc, pa, rounds=200)
        store_c = storage_params(r_cifar, 5, pc, ps, pa) / 1e6
        pc, ps, pa, q = femnist
        load_f = table_v_load_gib(r_femnist, [209] * 5, 10, q, pc, pa, rounds=500)
        store_f = storage_params(r_femnist, 5, pc, ps, pa) / 1e6
        cells = [(load_c, paper[0]), (load_f, paper[1]), (store_c, paper[2]), (store_f, paper[3])]
        row = [f"{ours:.2f} ({'-' if ref is None else f'{ref:.2f}'})" for ours, ref in cells]
        print(f"| {name} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
