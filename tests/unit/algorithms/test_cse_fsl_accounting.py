"""CSE-FSL and baselines: the accounting functions reproduce Table V, and tiny configurations by hand.

Table V's "GB" are GiB (2^30 bytes); loads exclude labels; storage is in millions of parameters
(specs/cse-fsl.md §3.3-3.4). The engine's counted bytes are checked against the same functions in
test_cse_fsl_runs.py.
"""

import math

import pytest
import torch

from raysfl.algorithms.common.fsl_accounting import (
    GIB,
    RoundBytes,
    round_bytes,
    storage_params,
    table_v_load_gib,
    tensor_bytes,
)
from raysfl.algorithms.common.fsl_round import FSLRules, chunks, round_batch_sizes, segments, upload_batches
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

MC = splitfed_v1_rules(SplitFedV1Params())
OC = splitfed_v2_rules(SplitFedV2Params())
AN = fsl_an_rules(FSLANParams())
AN_DROP = fsl_an_rules(FSLANParams(drop_last=True))


def cse(h, **kw):
    return cse_fsl_rules(CSEFSLParams(h=h, **kw))


def sizes_of(name, aux, c, s):
    """(P_c, P_s, P_a, q) of a zoo model, built on the meta device."""
    with torch.device("meta"):
        m = build_split_model(ModelConfig(name=name, aux=aux), c, s, 10 if "cifar" in name else 62, seed=0)
    return count_params(m.client), count_params(m.server), count_params(m.aux), math.prod(m.activation_shape)


CIFAR = sizes_of("cse_fsl_cifar10", "mlp", 3, 24)
FEMNIST = sizes_of("cse_fsl_femnist", "mlp", 1, 28)


def test_the_zoo_nets_have_the_papers_sizes():
    assert CIFAR == (107_328, 960_970, 23_050, 2304)
    assert FEMNIST == (18_816, 1_187_774, 571_454, 9216)


CIFAR_LOADS = [  # [P] Table V, CIFAR-10: 5 clients × 10,000 images, B = 50, 200 epochs
    (MC, 172.46),
    (OC, 172.46),
    (AN, 86.80),
    (cse(5), 18.14),
    (cse(10), 9.55),
    (cse(25), 4.40),
    (cse(50), 2.69),
]
FEMNIST_LOADS = [  # [P] Table V, F-EMNIST: 5 clients × 209 samples, B = 10, 500 epochs
    (MC, 36.23),
    (OC, 36.23),
    (AN_DROP, 28.16),
    (cse(2), 19.58),
    (cse(4), 15.29),
    (cse(5), 14.43),
]


@pytest.mark.parametrize("rules, paper", CIFAR_LOADS, ids=lambda x: getattr(x, "method", None) or str(x))
def test_table_v_cifar10_loads(rules, paper):
    pc, _, pa, q = CIFAR
    gib = table_v_load_gib(rules, [10_000] * 5, 50, q, pc, pa, rounds=200)
    assert round(gib, 2) == paper


@pytest.mark.parametrize("rules, paper", FEMNIST_LOADS, ids=lambda x: getattr(x, "method", None) or str(x))
def test_table_v_femnist_loads(rules, paper):
    pc, _, pa, q = FEMNIST
    gib = table_v_load_gib(rules, [209] * 5, 10, q, pc, pa, rounds=500)
    assert round(gib, 2) == paper


def test_table_v_load_needs_the_floor_rule_and_the_drop_last_an():
    pc, _, pa, q = FEMNIST
    # Algorithm 1's literal `m mod h == 0` uploads ⌈21/2⌉ = 11 batches (the 11th is the partial one of 9
    # samples): 20.35, not Table V's 19.58 (the spec's 20.44 counts 11 full batches)
    first = cse(2, upload_rule="first_of_window")
    assert round(table_v_load_gib(first, [209] * 5, 10, q, pc, pa, 500), 2) == 20.35
    # FSL_AN without dropping the partial batch would be 28.93, not 28.16
    assert round(table_v_load_gib(AN, [209] * 5, 10, q, pc, pa, 500), 2) == 28.93
    # h does not change the CSE-FSL F-EMNIST loads whether the last partial batch is dropped or not
    for h in (2, 4, 5):
        a = table_v_load_gib(cse(h), [209] * 5, 10, q, pc, pa, 500)
        b = table_v_load_gib(cse(h, drop_last=True), [209] * 5, 10, q, pc, pa, 500)
        assert a == b


def test_spec_per_round_byte_constants():
    pc, _, pa, q = CIFAR
    r = round_bytes(MC, [10_000] * 5, 50, q, pc)
    assert (r.smashed + r.gradients, r.models_up + r.models_down) == (921_600_000, 4_293_120)
    r = round_bytes(cse(5), [10_000] * 5, 50, q, pc, pa)
    assert (r.smashed, r.models_up + r.models_down, r.gradients) == (92_160_000, 5_215_120, 0)
    assert r.labels == 5 * 40 * 50 * 8  # labels are counted, but not in the paper's load
    assert r.load == 92_160_000 + 5_215_120


STORAGE = [  # [P] Table V "Storage (M)" with n = 5 clients
    (MC, 5.34, 6.03),
    (OC, 1.50, 1.28),
    (AN, 5.46, 8.89),
    (cse(5), 1.61, 4.14),
]


@pytest.mark.parametrize("rules, cifar, femnist", STORAGE, ids=lambda x: getattr(x, "method", None) or str(x))
def test_table_v_storage(rules, cifar, femnist):
    for (pc, ps, pa, _), paper in ((CIFAR, cifar), (FEMNIST, femnist)):
        assert round(storage_params(rules, 5, pc, ps, pa) / 1e6, 2) == paper


def test_storage_savings_quoted_in_the_paper():
    pc, ps, pa, _ = CIFAR
    assert 1 - storage_params(cse(5), 5, pc, ps, pa) / storage_params(AN, 5, pc, ps, pa) > 0.70
    pc, ps, pa, _ = FEMNIST
    saving = 1 - storage_params(cse(5), 5, pc, ps, pa) / storage_params(AN, 5, pc, ps, pa)
    assert round(100 * saving) == 53


def test_server_model_storage_does_not_grow_with_n_for_cse_but_does_for_mc():
    pc, ps, pa, _ = CIFAR
    assert storage_params(cse(5), 10, pc, ps, pa) - storage_params(cse(5), 5, pc, ps, pa) == 5 * (pc + pa)
    assert storage_params(MC, 10, pc, ps, pa) - storage_params(MC, 5, pc, ps, pa) == 5 * (pc + ps)


# --- the tiny configuration of test_cse_fsl_runs.py, by hand ----------------------------------------------
# 3 clients × 200 samples, B = 16 → 13 batches (12 × 16 + 8); lenet5 cut at conv2: q = 16·5·5 = 400 floats,
# P_c = 156 + 2,416 = 2,572, P_a (mlp) = 400·10 + 10 = 4,010.
Q, PC, PA = 400, 2572, 4010


def test_round_structure_by_hand():
    assert round_batch_sizes(200, 16, drop_last=False) == [16] * 12 + [8]
    assert round_batch_sizes(200, 16, drop_last=True) == [16] * 12
    assert upload_batches(13, 5, "last_of_window") == [4, 9]
    assert upload_batches(13, 5, "first_of_window") == [0, 5, 10]
    assert segments(13, 5) == [(0, 5), (5, 10), (10, 13)] and segments(13, 0) == [(0, 13)]
    assert chunks(0, 13, {4, 9}) == [(0, 5, True), (5, 10, True), (10, 13, False)]


@pytest.mark.parametrize(
    "rules, expected",
    [
        # CSE-FSL h = 5: batches 4 and 9 (16 samples each) per client
        (cse(5), RoundBytes(3 * 32 * 1600, 3 * 32 * 8, 0, 3 * 6582 * 4, 3 * 6582 * 4)),
        # Algorithm 1's rule: batches 0, 5, 10
        (cse(5, upload_rule="first_of_window"), RoundBytes(3 * 48 * 1600, 3 * 48 * 8, 0, 78_984, 78_984)),
        # aggregation every 5 batches: 3 model round trips per client
        (cse(5, agg_every_batches=5), RoundBytes(153_600, 768, 0, 3 * 78_984, 3 * 78_984)),
        (AN, RoundBytes(3 * 200 * 1600, 3 * 200 * 8, 0, 78_984, 78_984)),
        (AN_DROP, RoundBytes(3 * 192 * 1600, 3 * 192 * 8, 0, 78_984, 78_984)),
        (MC, RoundBytes(960_000, 4_800, 960_000, 3 * 2572 * 4, 3 * 2572 * 4)),
        (OC, RoundBytes(960_000, 4_800, 960_000, 30_864, 30_864)),
    ],
    ids=["cse_h5", "cse_first", "cse_agg5", "an", "an_drop", "mc", "oc"],
)
def test_round_bytes_by_hand(rules, expected):
    assert round_bytes(rules, [200] * 3, 16, Q, PC, PA) == expected


def test_storage_by_hand():
    ps = 59_134  # lenet5 server part
    assert storage_params(cse(5), 3, PC, ps, PA) == ps + 3 * (PC + PA) == 78_880
    assert storage_params(OC, 3, PC, ps, PA) == ps + 3 * PC
    assert storage_params(MC, 3, PC, ps, PA) == 3 * (PC + ps)
    assert storage_params(AN, 3, PC, ps, PA) == 3 * (PC + ps + PA)


def test_tensor_bytes_counts_dtypes():
    msg = (torch.zeros(4, 16, 5, 5), torch.zeros(4, dtype=torch.int64))
    assert tensor_bytes(msg) == 4 * 400 * 4 + 4 * 8
    assert (
        tensor_bytes({"client": {"w": torch.zeros(3)}, "aux": {"b": torch.zeros(2, dtype=torch.float64)}})
        == 28
    )
    assert GIB == 1 << 30


def test_rules_reject_inconsistent_methods():
    with pytest.raises(ValueError, match="gradient methods"):
        FSLRules(method="x", local_loss=False, server_copies=False, h=2)
