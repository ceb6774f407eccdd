"""Lightweight FedSL pure pieces (specs/lightweight-fedsl.md): quantizer, pruning, dropout, bytes, latency."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from raysfl.algorithms.lightweight_fedsl.accounting import client_round_bytes, round_bytes
from raysfl.algorithms.lightweight_fedsl.client import FedSLClient
from raysfl.algorithms.lightweight_fedsl.dropout import (
    bitmap_bytes,
    drop,
    dropout_mask,
    gather,
    kept_count,
    restore,
)
from raysfl.algorithms.lightweight_fedsl.latency import pruned_flops, round_latency
from raysfl.algorithms.lightweight_fedsl.params import LightweightFedSLParams, TraditionalFedSLParams
from raysfl.algorithms.lightweight_fedsl.pruning import (
    global_masks,
    importance,
    is_prunable,
    prune_count,
    sparsity_target,
)
from raysfl.algorithms.lightweight_fedsl.quantize import quant_step, quantize_gradients, stochastic_quantize


# --- quantizer, eq. (11)-(12) -----
def test_quantizer_by_hand_one_bit():
    """q = 1: knobs {g_min, g_max} = {0, 1}; |0.25| rounds up with probability 0.25; -1 and 0 are exact."""
    g = torch.tensor([0.0, 0.25, -1.0])
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([stochastic_quantize(g, 1, gen) for _ in range(4000)])
    assert set(draws[:, 1].tolist()) == {0.0, 1.0}
    assert draws[:, 0].eq(0).all() and draws[:, 2].eq(-1).all()
    assert abs(draws[:, 1].mean().item() - 0.25) < 0.03


def test_quantizer_is_unbiased():
    """E[Q(g)] = g (Assumption 6): the mean of many draws is within 5 standard errors of g, element-wise."""
    gen = torch.Generator().manual_seed(1)
    g = torch.randn(500, generator=gen, dtype=torch.float64)
    n, bits = 3000, 3
    mean = sum(stochastic_quantize(g, bits, gen) for _ in range(n)) / n
    delta = quant_step(float(g.abs().min()), float(g.abs().max()), bits)
    assert (mean - g).abs().max().item() < 5 * (delta / 2) / math.sqrt(n)
    assert (mean - g).abs().max().item() > 0  # it is random, not the identity


def test_quantizer_error_shrinks_with_bits_and_respects_the_bound():
    """E‖Q(g) − g‖² ≤ M Δ²/4 with Δ = (g_max − g_min)/(2^q − 1), and it falls as q grows."""
    gen = torch.Generator().manual_seed(2)
    g = torch.randn(2000, generator=gen, dtype=torch.float64)
    lo, hi = float(g.abs().min()), float(g.abs().max())
    errors = []
    for bits in (2, 4, 8, 12):
        err = sum(float(((stochastic_quantize(g, bits, gen) - g) ** 2).sum()) for _ in range(20)) / 20
        assert err <= g.numel() * quant_step(lo, hi, bits) ** 2 / 4
        errors.append(err)
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0] / 1000


def test_quantized_values_lie_on_the_knobs_keep_sign_and_zeros():
    gen = torch.Generator().manual_seed(3)
    g = torch.randn(300, generator=gen)
    g[::7] = 0.0
    bits = 4
    q = stochastic_quantize(g, bits, gen)
    lo, hi = float(g.abs().min()), float(g.abs().max())
    levels = (q.abs().double() - lo) / quant_step(lo, hi, bits)
    nz = g != 0
    assert torch.allclose(levels[nz], levels[nz].round(), atol=1e-4)
    moved = q[nz] != 0  # with g_min = 0 the lowest knob is 0, so a small entry may round to 0
    assert torch.equal(torch.sign(q[nz][moved]), torch.sign(g[nz][moved])) and q[~nz].eq(0).all()
    assert torch.equal(stochastic_quantize(g, 32, gen), g)  # q = 32: the baseline, no quantization


def test_knobs_start_at_the_smallest_magnitude():
    assert quant_step(0.5, 2.0, 2) == pytest.approx(0.5)  # (2 - 0.5) / (2**2 - 1)
    gen = torch.Generator().manual_seed(3)
    g = torch.randn(300, generator=gen, dtype=torch.float64)  # no zeros: g_min > 0
    lo, hi = float(g.abs().min()), float(g.abs().max())
    levels = (stochastic_quantize(g, 4, gen).abs() - lo) / ((hi - lo) / 15)
    assert torch.allclose(levels, levels.round(), atol=1e-6)


def test_global_range_spans_all_tensors_and_per_tensor_does_not():
    gen = torch.Generator().manual_seed(4)
    small, big = torch.full((50,), 0.01), torch.full((50,), 10.0)
    small[0] = 0.0
    glob = quantize_gradients([small, big], 2, gen, "global")
    per = quantize_gradients([small, big], 2, gen, "per-tensor")
    assert set(glob[0].unique().tolist()) <= {0.0, 10 / 3}  # the small tensor sees the big one's knobs
    assert torch.allclose(per[0], small) and torch.equal(per[1], big)  # its own range [0, 0.01]: exact


# --- pruning, eq. (9)-(10) -----
def test_cubic_schedule_matches_the_spec_table():
    ratios = [0.271, 0.488, 0.657, 0.784, 0.875, 0.936, 0.973, 0.992, 0.999, 1.0]
    got = [sparsity_target(t, 10, 1.0) for t in range(1, 11)]
    assert got == pytest.approx(ratios, abs=5e-4)
    assert sparsity_target(0, 10, 0.35) == 0 and sparsity_target(10, 10, 0.35) == pytest.approx(0.35)
    assert sparsity_target(1, 10, 0.35) == pytest.approx(0.0948, abs=1e-4)
    assert sparsity_target(15, 10, 0.35) == pytest.approx(0.35)  # stays at ρ_f after T


def test_global_mask_by_hand_prunes_lowest_taylor_scores_and_masked_first():
    w = {"a": torch.tensor([[1.0, -2.0], [3.0, 0.5]]), "b": torch.tensor([[4.0, 1.0]])}
    g = {"a": torch.tensor([[1.0, 1.0], [0.1, -1.0]]), "b": torch.tensor([[0.01, 5.0]])}
    # |w⊙g| = a: [1, 2, 0.3, 0.5], b: [0.04, 5]; ⌈0.5·6⌉ = 3 lowest: b0, a2, a3
    scores = {n: importance(w[n], g[n]) for n in w}
    m = global_masks(scores, 0.5)
    assert m["a"].tolist() == [[True, True], [False, False]] and m["b"].tolist() == [[False, True]]
    # an already-masked entry ranks first even though its score is the largest
    masked = {n: importance(w[n], g[n], torch.ones_like(w[n], dtype=torch.bool)) for n in w}
    masked["b"] = importance(w["b"], g["b"], torch.tensor([[True, False]]))
    m2 = global_masks(masked, 1 / 6)
    assert m2["b"].tolist() == [[True, False]] and m2["a"].all()
    per = global_masks(scores, 0.75, "per-layer")  # ⌈0.75·4⌉ = 3 in a, ⌈0.75·2⌉ = 2 in b
    assert per["a"].tolist() == [[False, True], [False, False]] and per["b"].tolist() == [[False, False]]
    assert global_masks(scores, 0.75)["b"].tolist() == [[False, True]]  # global keeps b's 5
    assert prune_count(0.35, 100) == 35


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _client(params: LightweightFedSLParams, n: int = 64) -> tuple[FedSLClient, object]:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (n, 3, 4, 4), dtype=np.uint8)
    y = rng.integers(0, 10, n)

    def tf(imgs: np.ndarray, gen: torch.Generator) -> torch.Tensor:
        return torch.from_numpy(imgs).float() / 255

    client = FedSLClient(_Net(), x, y, tf, params, batch_size=8, weight_decay=0.0, seed=5)
    return client, client.init_state(0, np.arange(n), np.random.SeedSequence(1))


def _round(client: FedSLClient, st, t: int, target: float) -> None:
    values, y, _ = client.forward(st, t)
    client.backward(
        st, torch.randn(values.shape, generator=torch.Generator().manual_seed(t)), t, target, 0.05
    )


def test_pruning_hits_the_schedule_and_masks_never_regrow():
    """Persistent nested masks (spec §3.3): zero sets only grow, sparsity = ⌈ρ_t M_p⌉/M_p, ρ_f at T."""
    T, final = 12, 0.7
    client, st = _client(LightweightFedSLParams(prune_final=final, quant_bits=8, dropout=0.3))
    total = sum(st.params[n].numel() for n in st.masks)
    before = {n: torch.zeros_like(st.params[n], dtype=torch.bool) for n in st.masks}
    for t in range(1, T + 1):
        target = sparsity_target(t, T, final)
        _round(client, st, t, target)
        zeros = {n: st.params[n].detach() == 0 for n in st.masks}
        assert all(torch.all(zeros[n] | ~before[n]) for n in st.masks), f"a pruned weight regrew in round {t}"
        assert sum(int(z.sum()) for z in zeros.values()) == prune_count(target, total)
        before = zeros
    assert client.sparsity(st) == pytest.approx(final, abs=1 / total)
    assert st.prunings == T
    for n in st.masks:  # biases are never pruned
        assert st.params[n.replace("weight", "bias")].ne(0).all()


def test_literal_regrowth_lets_pruned_weights_come_back():
    """Alg. 1 literally: no mask in rounds that do not re-prune, so masked weights move again."""
    client, st = _client(
        LightweightFedSLParams(prune_final=0.5, quant_bits=32, dropout=0.0, literal_regrowth=True)
    )
    _round(client, st, 1, 0.5)
    pruned = {n: st.params[n].detach() == 0 for n in st.masks}
    _round(client, st, 2, 0.5)  # sparsity already at ρ: no re-pruning, no mask
    assert any(bool((st.params[n].detach()[pruned[n]] != 0).any()) for n in st.masks)


@pytest.mark.parametrize("literal", [False, True])
def test_a_new_mask_ranks_regrown_weights_by_importance_alone_in_literal_mode(literal):
    """Alg. 1 l. 14-18 computes the new mask from ℐ = |w⊙g| alone. Literal mode ranked weights masked
    before first too, so a weight that had regrown to the most important was pruned again."""
    client, st = _client(LightweightFedSLParams(prune_final=0.5, quant_bits=32, literal_regrowth=literal))
    name = next(iter(st.masks))
    w = st.params[name].detach()
    g = {n: torch.ones_like(st.params[n]) for n in st.masks}
    st.masks = {n: torch.ones_like(m) for n, m in st.masks.items()}
    st.masks[name].view(-1)[0] = False  # masked once, then regrew in a round without re-pruning
    w.view(-1)[0] = 100.0  # now the most important weight by |w⊙g|
    assert client._maybe_prune(st, g, 0.5)
    assert bool(st.masks[name].view(-1)[0]) is literal  # kept by its importance only when literal


def test_aggregated_model_resets_the_mask_to_its_nonzeros():
    client, st = _client(LightweightFedSLParams(prune_final=0.5))
    w = client.weights(st)
    w["conv.weight"][0] = 0.0
    client.load(st, w)
    assert torch.equal(st.masks["conv.weight"], w["conv.weight"] != 0)


# --- dropout, eq. (3) and Corollary 1 -----
def test_dropout_keeps_the_expectation_and_sends_only_kept_values():
    a = torch.rand(4, 6, 3, 3)
    p = 0.3
    acc = torch.zeros_like(a)
    n = 4000
    for t in range(n):
        mask = dropout_mask(9, 2, t, a.shape, p)
        values = drop(a, mask, p)
        assert values.numel() == int(mask.sum()) == kept_count(9, 2, t, a.shape, p)
        acc += restore(values, mask)
    assert torch.allclose(acc / n, a, atol=6 * a.max().item() * math.sqrt(p / (1 - p) / n))
    assert abs(int(dropout_mask(9, 2, 0, (64, 4096), p).sum()) / (64 * 4096) - (1 - p)) < 0.01


def test_dropout_mask_is_reproducible_and_channel_mode_drops_whole_channels():
    m1 = dropout_mask(1, 3, 7, (2, 5, 4, 4), 0.5)
    assert np.array_equal(m1, dropout_mask(1, 3, 7, (2, 5, 4, 4), 0.5))
    assert not np.array_equal(m1, dropout_mask(1, 3, 8, (2, 5, 4, 4), 0.5))
    ch = dropout_mask(1, 3, 7, (2, 5, 4, 4), 0.5, "channel")
    assert np.all(ch.all(axis=(2, 3)) | ~ch.any(axis=(2, 3)))
    mixed = m1.any(axis=(2, 3)) & ~m1.all(axis=(2, 3))  # element mode: channels partly kept
    assert mixed.sum() >= 5  # of 10 (sample, channel) pairs; 16 draws each, so nearly all are mixed
    assert dropout_mask(1, 3, 7, (2, 5), 0.0).all()
    full = torch.arange(24.0).reshape(2, 3, 4)
    mask = dropout_mask(2, 0, 0, full.shape, 0.5)
    assert torch.equal(restore(gather(full, mask), mask), full * torch.from_numpy(mask))


# --- bytes and latency -----
def test_bytes_per_round_by_hand():
    """b = 64, A(L_c = 8) = 4096 (spec §2.3): 64·4096·4 + 64·4 bytes up at p = 0; the kept share at p > 0."""
    one = client_round_bytes(kept=262_144, batch=64, numel=262_144, label_bytes=4)
    assert (one.up, one.down) == (1_048_576 + 256, 1_048_576)
    kept = kept_count(0, 0, 1, (64, 256, 4, 4), 0.3)
    dropped = client_round_bytes(kept, 64, 262_144, 4, bitmap=True, model_bytes=1000, aggregate=True)
    assert dropped.smashed == 4 * kept and dropped.mask == 262_144 // 8 == bitmap_bytes(262_144)
    assert dropped.up == 4 * kept + 256 + 32_768 + 1000 and dropped.down == 4 * kept + 1000
    total = round_bytes([10, 20], [2, 3], 5, 8, model_bytes=7, aggregate=True)
    assert (total.smashed, total.labels, total.gradients, total.models_up) == (120, 40, 120, 14)


def test_round_latency_formula_and_spec_uplink_example():
    r = round_latency([1.0, 2.0], [0.5, 0.1], 0.3, [0.2, 0.4], [1.0, 0.5], [2.0, 1.0], [0.1, 0.2])
    assert r.forward_uplink_s == 2.1 and r.uplink_s == 0.5 and r.downlink_backward_s == 1.2
    assert r.total_s == pytest.approx(2.1 + 0.3 + 1.2 + 2.0 + 0.2)
    # spec §2.3: L_c = 4 / 8 / 12 at 300 m (35.88 Mb/s), b = 64, fp32: 16.78 / 8.39 / 4.19 Mbit → 0.468 / ...
    from raysfl.system.config import TimingConfig
    from raysfl.system.durations import TimeModel
    from raysfl.system.table import DeviceTable

    tm = TimeModel(DeviceTable(np.array([1e9]), np.array([35.88e6]), np.array([35.88e6])), TimingConfig())
    for acts, expect in ((8192, 0.468), (4096, 0.234), (2048, 0.117)):
        assert tm.upload_s(0, 64 * acts * 4) == pytest.approx(expect, abs=1e-3)
    assert pruned_flops(100.0, 0.35, 0.0) == 100.0 and pruned_flops(100.0, 0.35, 1.0) == pytest.approx(65.0)


def test_baseline_params_switch_everything_off():
    base, light = TraditionalFedSLParams(), LightweightFedSLParams()
    assert (base.prune_final, base.quant_bits, base.dropout, base.agg_interval) == (0.0, 32, 0.0, 1)
    assert (light.prune_final, light.quant_bits, light.dropout, light.agg_interval) == (0.35, 8, 0.3, 5)


def test_only_conv_and_linear_weights_are_prunable():
    """Spec §3.3 [A]: biases and BatchNorm's scale and shift are never pruned (no run's model has BN)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))
    prunable = [name for name, w in model.state_dict().items() if is_prunable(name, w)]
    assert prunable == ["0.weight", "3.weight"]
