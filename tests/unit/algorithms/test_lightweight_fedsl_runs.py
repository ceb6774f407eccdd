"""Lightweight FedSL on the engine (no Ray): server eq. (7), baseline = centralised SGD, bytes, latency."""

import copy
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.fsl_accounting import tensor_bytes
from raysfl.algorithms.lightweight_fedsl.accounting import round_bytes
from raysfl.algorithms.lightweight_fedsl.client import FedSLClient
from raysfl.algorithms.lightweight_fedsl.dropout import dropout_mask, gather, kept_count, restore
from raysfl.algorithms.lightweight_fedsl.params import TraditionalFedSLParams
from raysfl.algorithms.lightweight_fedsl.server import FedSLServer
from raysfl.config import ConfigError
from raysfl.engine import runner
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import build_split_model
from raysfl.scenario import scenario_from_dict

SMALL_VGG = {"name": "vgg19", "split": "Lc4", "vgg19_width_divisor": 16}
BASE = {
    "name": "tiny-lwfedsl",
    "seed": 5,
    "data": {
        "dataset": "synthetic",
        "partition": "iid",
        "synthetic_train": 300,
        "synthetic_test": 100,
        "synthetic_image_size": 32,
        "synthetic_channels": 3,
    },
    "model": SMALL_VGG,
    "federation": {"num_clients": 3, "active_clients": 3},
    "train": {"global_iterations": 6, "batch_size": 16, "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0},
    "algorithm": {
        "name": "lightweight_fedsl",
        "params": {"prune_final": 0.5, "quant_bits": 6, "dropout": 0.4, "agg_interval": 3},
    },
    "system": {
        "compute": {"kind": "fixed", "flops_per_s": 2e9},
        "link": {
            "kind": "wireless",
            "placement": "radius",
            "min_distance_m": 100.0,
            "radius_m": 300.0,
            "tx_power_dbm": 23.0,
            "server_tx_power_dbm": 37.0,
            "bandwidth_hz": 5e6,
            "bandwidth_mode": "per-client",
        },
        "server_flops_per_s": 1e11,
    },
    "engine": {"torch_threads": 1, "server_threads": 1},
    "metrics": {"progress": False, "tensorboard": False},
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _setup(overrides=(), base=BASE) -> RunSetup:
    sc = scenario_from_dict(base, overrides)
    return RunSetup(sc, sc.params, (3, 32, 32), 10, (), None)


def _model(bn: bool, seed: int = 3):
    cfg = ModelConfig(**SMALL_VGG, vgg19_batch_norm=bn)
    return build_split_model(cfg, 3, 32, 10, seed=seed)


def _uploads(setup, model, sizes, round_index, gen):
    """What clients would send: kept values of the dropped activations, int32 labels, no bitmap."""
    out = []
    p = setup.params
    for k, b in enumerate(sizes):
        acts = model.client(torch.randn(b, 3, 32, 32, generator=gen)).detach()
        mask = dropout_mask(setup.scenario.seed, k, round_index, acts.shape, p.dropout, p.dropout_granularity)
        vals = acts[torch.from_numpy(mask)] / (1 - p.dropout)
        out.append((vals, torch.randint(0, 10, (b,), generator=gen, dtype=torch.int32), None))
    return out


@pytest.mark.parametrize("batching", ["per-client", "concatenated"])
def test_server_step_is_eq7_and_returns_each_clients_gradient(batching):
    """w_s ← w_s − (η/K) Σ_k ∇CE_k(w_s) with all ∂F/∂Ã_k under the same w_s; kept positions only."""
    setup = _setup([f"algorithm.params.server_batching='{batching}'"])
    model = _model(bn=False)
    reference = copy.deepcopy(model.server)
    server = FedSLServer(setup, model, torch.zeros(0, 3, 32, 32), torch.zeros(0, dtype=torch.long), 5, "cpu")
    gen = torch.Generator().manual_seed(0)
    ups = _uploads(setup, model, [4, 6, 5], 2, gen)
    rows = []
    server.server_model.register_forward_pre_hook(lambda m, args: rows.append(len(args[0])))
    server.step(2, (0, 1, 2), *ups)
    assert rows == ([15] if batching == "concatenated" else [4, 6, 5])
    lr, grads_sum = setup.scenario.train.lr, [torch.zeros_like(p) for p in reference.parameters()]
    for k, (vals, y, _) in enumerate(ups):
        mask = dropout_mask(5, k, 2, (len(y), *server.act_shape), 0.4)
        a = restore(vals, mask).requires_grad_(True)
        loss = F.cross_entropy(reference(a), y.long())
        g = torch.autograd.grad(loss, [a, *reference.parameters()])
        assert torch.allclose(server.gradient(k), gather(g[0], mask), atol=1e-6)
        grads_sum = [s + gi for s, gi in zip(grads_sum, g[1:], strict=True)]
    for p_new, p_old, gs in zip(
        server.server_model.parameters(), reference.parameters(), grads_sum, strict=True
    ):
        assert torch.allclose(p_new, p_old - lr * gs / 3, atol=1e-6)


def test_client_step_with_dropout_is_the_gradient_through_the_dropped_activations():
    """Eq. (3), (8): with p > 0 the client's step is w_c − η ∂L/∂w_c of L = CE(w_s(δ⊙A(w_c)/(1−p))),
    here by autograd end to end (no pruning, no quantization): the downlink's kept gradients, scaled back
    by δ/(1−p) on the client, are the chain rule through the dropout mask."""
    setup = _setup(["algorithm.params.prune_final=0.0", "algorithm.params.quant_bits=32"])
    p, seed, lr, b = setup.params.dropout, setup.scenario.seed, setup.scenario.train.lr, 4
    model = _model(bn=True)  # without BatchNorm this narrow VGG's client gradients are ~1e-9
    reference = copy.deepcopy(model)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 255, (2 * b, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, 2 * b)

    def tf(imgs, gen):
        return torch.from_numpy(imgs).float() / 255

    client = FedSLClient(model.client, x, y, tf, setup.params, batch_size=b, weight_decay=0.0, seed=seed)
    no_test = torch.zeros(0, 3, 32, 32), torch.zeros(0, dtype=torch.long)
    server = FedSLServer(setup, model, *no_test, seed, "cpu")
    state = client.init_state(0, np.arange(2 * b), np.random.SeedSequence(0))
    twin = copy.deepcopy(state)  # draws the same minibatch, to rebuild it here
    idx = twin.indices[twin.cursor.next_positions(twin.rng)]
    server.step(1, (0,), client.forward(state, 1))
    client.backward(state, server.gradient(0), 1, 0.0, lr)

    acts = reference.client(tf(x[idx], None))
    mask = torch.from_numpy(dropout_mask(seed, 0, 1, acts.shape, p))
    assert 0 < int(mask.sum()) < mask.numel()
    loss = F.cross_entropy(reference.server(acts * mask / (1 - p)), torch.from_numpy(y[idx]))
    grads = torch.autograd.grad(loss, list(reference.client.parameters()))
    for (name, w0), g in zip(reference.client.named_parameters(), grads, strict=True):
        assert torch.allclose(state.params[name], w0 - lr * g, rtol=1e-4, atol=1e-7), name
    steps = [(state.params[n] - w).detach().abs().max() for n, w in reference.client.named_parameters()]
    moved = max(float(d) for d in steps)
    assert moved > 1e-4, "the step is too small to test anything"


def test_traditional_fedsl_round_equals_centralised_sgd_without_batchnorm():
    """Baseline (ρ_f = 0, no Q, p = 0, I = 1), IID, no BN: one round = one SGD step of the whole model on the
    K·b batch with the mean of the per-client mean losses (spec §7 checklist)."""
    base = {**BASE, "algorithm": {"name": "fedsl", "params": {}}}
    setup = _setup(base=base)
    assert isinstance(setup.params, TraditionalFedSLParams)
    model = _model(bn=False)
    whole = copy.deepcopy(model)
    rng = np.random.default_rng(0)
    b, k_clients, lr = 4, 2, setup.scenario.train.lr
    x = rng.integers(0, 255, (b * k_clients, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, b * k_clients)

    def tf(imgs, gen):
        return torch.from_numpy(imgs).float() / 255

    client = FedSLClient(model.client, x, y, tf, setup.params, batch_size=b, weight_decay=0.0, seed=5)
    server = FedSLServer(setup, model, torch.zeros(0, 3, 32, 32), torch.zeros(0, dtype=torch.long), 5, "cpu")
    states = [
        client.init_state(k, np.arange(k * b, (k + 1) * b), np.random.SeedSequence(k)) for k in range(2)
    ]
    server.step(1, (0, 1), *[client.forward(st, 1) for st in states])
    for k, st in enumerate(states):
        client.backward(st, server.gradient(k), 1, 0.0, lr)
    server.aggregate(*[client.weights(st) for st in states])
    xs = torch.from_numpy(x).float() / 255
    ys = torch.from_numpy(y).long()
    loss = (
        sum(
            F.cross_entropy(whole.server(whole.client(xs[k * b : (k + 1) * b])), ys[k * b : (k + 1) * b])
            for k in range(2)
        )
        / 2
    )
    loss.backward()
    with torch.no_grad():
        for p in [*whole.client.parameters(), *whole.server.parameters()]:
            p -= lr * p.grad
    for name, value in whole.client.state_dict().items():
        assert torch.allclose(server.global_client[name], value, atol=1e-5), name
    for got, want in zip(server.server_model.parameters(), whole.server.parameters(), strict=True):
        assert torch.allclose(got, want, atol=1e-5)


def _run(tmp_path, overrides=(), name="run", base=BASE):
    sc = scenario_from_dict(base, overrides)
    summary = runner.run(sc, tmp_path / name, backend="local")
    events = pq.read_table(tmp_path / name / "events.parquet").to_pylist()
    metrics = pq.read_table(tmp_path / name / "metrics.parquet").to_pylist()
    return sc, summary, events, metrics


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("lw"), ["algorithm.params.mask_overhead='bitmap'"])


def test_counted_bytes_match_the_policy_and_a_hand_computation(tiny):
    """Counted bytes = the event log's = Σ_rounds kept·4 + b·4 (+ bitmap) + models on aggregation rounds."""
    sc, summary, events, metrics = tiny
    last = metrics[-1]
    assert (
        summary["bytes_up"] == last["bytes_up_counted"]
        and summary["bytes_down"] == last["bytes_down_counted"]
    )
    prep = runner.prepare(sc)
    model = build_split_model(sc.model, 3, 32, 10, seed=0)
    model_bytes = tensor_bytes(model.client.state_dict())
    numel = math.prod(prep.profile.activation_shape)
    sizes = [len(ix) for ix in prep.setup.client_indices]
    total_up = total_down = 0
    for t in range(1, 7):  # 100 samples per client, b = 16: every batch of a 6-round run is full (96 < 100)
        batches = [16] * 3
        kept = [kept_count(5, k, t, (16, *prep.profile.activation_shape), 0.4) for k in range(3)]
        r = round_bytes(kept, batches, numel, 4, bitmap=True, model_bytes=model_bytes, aggregate=t % 3 == 0)
        total_up, total_down = total_up + r.up, total_down + r.down
    assert sizes == [100, 100, 100]
    assert (last["bytes_up_counted"], last["bytes_down_counted"]) == (total_up, total_down)
    assert last["bytes_up_mask"] == 6 * 3 * math.ceil(16 * numel / 8)
    assert 0.5 < last["bytes_up_smashed"] / (6 * 3 * 16 * numel * 4) / 0.6 < 1.1  # ≈ (1 − p) of the values


def test_latency_is_logged_and_equals_the_uplink_time_of_the_slowest_client(tiny):
    sc, _, events, metrics = tiny
    prep = runner.prepare(sc)
    tm, shape = prep.time_model, prep.profile.activation_shape
    numel = math.prod(shape)
    ups = [
        tm.upload_s(k, 4 * kept_count(5, k, 6, (16, *shape), 0.4) + 16 * 4 + math.ceil(16 * numel / 8))
        for k in range(3)
    ]
    last = metrics[-1]
    assert last["latency_uplink_s"] == pytest.approx(max(ups), rel=1e-12)
    assert last["latency_round_s"] > last["latency_uplink_s"] > 0
    assert [m["iteration"] for m in metrics] == [0, 3, 6]  # evaluated at aggregation rounds
    assert last["aggregations"] == 2 and last["server_steps"] == 6
    assert last["sparsity_target"] == pytest.approx(0.5)
    assert 0 < last["client_sparsity"] <= 0.5  # the average of the pruned models is denser (spec §3.3)
    ends = [e["t"] for e in events if e["kind"] == "model"]
    assert metrics[-1]["t"] == pytest.approx(max(ends))


def test_dropout_shortens_the_uplink_and_shallow_splits_send_more(tmp_path):
    """Fig. 4 in miniature: uplink latency falls with p and is larger at L_c = 4 than at L_c = 12."""
    lat = {}
    for split in ("Lc4", "Lc12"):
        for p in (0.0, 0.7):
            over = [f"model.split='{split}'", f"algorithm.params.dropout={p}", "train.global_iterations=3"]
            _, _, _, m = _run(tmp_path, over, name=f"{split}-{p}")
            lat[split, p] = m[-1]["latency_uplink_mean_s"]
    assert lat["Lc4", 0.7] < lat["Lc4", 0.0] and lat["Lc12", 0.7] < lat["Lc12", 0.0]
    assert lat["Lc4", 0.0] > lat["Lc12", 0.0]
    assert lat["Lc4", 0.0] - lat["Lc4", 0.7] > lat["Lc12", 0.0] - lat["Lc12", 0.7]


def test_validation_errors_name_the_fields():
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(BASE, ["train.optimizer='adam'", "algorithm.params.prune_rounds=7"])
    text = str(err.value)
    assert "train.optimizer" in text and "algorithm.params.prune_rounds" in text


@pytest.mark.slow
def test_lightweight_fedsl_learns_above_chance(tmp_path):
    """End to end on the learnable synthetic set: baseline and compressed method far above chance (10 %)."""
    over = [
        "train.global_iterations=60",
        "train.eval_every=30",
        "train.lr=0.1",
        "model.name='lenet5'",
        "model.split=''",
        "data.synthetic_image_size=28",
        "data.synthetic_channels=1",
        "data.synthetic_train=600",
    ]
    for method in ("fedsl", "lightweight_fedsl"):
        _, summary, _, _ = _run(tmp_path, [*over, f"algorithm.name='{method}'"], name=method)
        assert summary["final_accuracy"] > 0.5, method


def test_partial_participation_keeps_the_clients_of_an_aggregation_period(tmp_path):
    """C < K [A]: C clients drawn per period of I rounds; they train all I rounds and are averaged."""
    over = ["federation.num_clients=4", "federation.active_clients=2", "train.global_iterations=6"]
    _, _, events, metrics = _run(tmp_path, over)
    acts = [(e["e"], e["client"]) for e in events if e["kind"] == "act"]
    per_round = {t: sorted(k for r, k in acts if r == t) for t in range(1, 7)}
    assert all(len(ks) == 2 for ks in per_round.values())
    assert per_round[1] == per_round[2] == per_round[3] and per_round[4] == per_round[5] == per_round[6]
    downloads = [e for e in events if e["kind"] == "download"]
    assert len(downloads) == 2 * 2 and metrics[-1]["aggregations"] == 2


def test_width_divisor_keeps_depth_and_cuts_and_divides_widths():
    """The quick scenarios' small VGG-19: same convs and cuts, every width / d (d = 1: unchanged)."""
    with torch.device("meta"):
        full = build_split_model(ModelConfig(name="vgg19", split="Lc8"), 3, 32, 10, seed=0)
        small = build_split_model(
            ModelConfig(name="vgg19", split="Lc8", vgg19_width_divisor=16), 3, 32, 10, seed=0
        )
    assert [n for n, _ in full.client.named_children()] == [n for n, _ in small.client.named_children()]
    assert full.client.conv8.out_channels == 256 and small.client.conv8.out_channels == 16
    assert small.server.fc1.out_features == 32 and small.server.fc3.out_features == 10
