"""``engine.memory_format``: channels-last conv weights, same model up to float rounding, runs deterministic.

The option changes numbers (other convolution kernels, other rounding); these tests state by how much:
a forward/backward of every zoo model agrees with the contiguous one to float32 rounding, and a short
run's metrics agree to a few units in the fifth decimal, while a channels-last run is reproducible
bit for bit, in-process and on Ray pools.
"""

import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from raysfl.config import ConfigError, apply_overrides
from raysfl.engine.hosts import build_model
from raysfl.engine.runner import run
from raysfl.models import MODEL_NAMES, MODELS
from raysfl.scenario import scenario_from_dict
from tests.unit.engine.test_checkpoint_resume import run_crash_and_resume, tiny
from tests.unit.models.zoo_scan import zoo_setup

CL = torch.channels_last


def test_the_option_names_its_choices():
    with pytest.raises(ConfigError, match=r"engine\.memory_format.*channels_last"):
        scenario_from_dict({"engine": {"memory_format": "nhwc"}})
    model = build_model(zoo_setup("lenet5", memory_format="contiguous"))
    with pytest.raises(ValueError, match=r"memory_format must be one of \['channels_last', 'contiguous'\]"):
        model.use_memory_format("nhwc")
    w = model.use_memory_format("channels_last").client.conv2.weight  # 6 input channels: one layout or other
    assert w.is_contiguous(memory_format=CL) and not w.is_contiguous()
    w = model.use_memory_format("contiguous").client.conv2.weight
    assert w.is_contiguous() and not w.is_contiguous(memory_format=CL)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_zoo_model_gives_the_same_outputs_and_gradients_channels_last(name):
    """Same initial weights, conv weights stored channels-last; the cut's activations (channels-last when
    they are a feature map), the loss and every gradient equal to float32 rounding. In eval mode: dropout
    on a feature map draws its mask in memory order (another mask of the same distribution), and
    small-batch BatchNorm statistics would amplify the rounding. A rounding difference can still flip a
    ReLU whose input is within it of zero, so gradients are compared by their relative error, not element
    by element."""
    shape = MODELS[name].inputs[0]
    ref = build_model(zoo_setup(name, memory_format="contiguous"))
    cl = build_model(zoo_setup(name, memory_format="channels_last"))
    convs = 0
    for part in ("client", "server"):
        for (k, a), (_, b) in zip(
            getattr(ref, part).state_dict().items(), getattr(cl, part).state_dict().items(), strict=True
        ):
            assert torch.equal(a, b), f"{part}.{k}: the initial weights differ"
            if b.dim() == 4:
                convs += 1
                assert b.is_contiguous(memory_format=CL), f"{part}.{k} is not channels-last"
    assert convs > 0
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, *shape, generator=gen)
    y = torch.randint(0, 10, (4,), generator=gen)
    outs = []
    for m in (ref, cl):
        for part in (m.client, m.server):
            part.eval()
            part.zero_grad()
        acts = m.client(x)
        loss = F.cross_entropy(m.server(acts), y)
        loss.backward()
        outs.append((acts, loss))
    (a_ref, l_ref), (a_cl, l_cl) = outs
    torch.testing.assert_close(a_cl, a_ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(l_cl, l_ref, rtol=1e-5, atol=1e-5)
    if a_cl.dim() == 4:  # a feature map at the cut (every zoo model but the ViT) travels channels-last
        assert a_cl.is_contiguous(memory_format=CL) and not a_cl.is_contiguous()
    for part in ("client", "server"):
        for (k, p_ref), (_, p_cl) in zip(
            getattr(ref, part).named_parameters(), getattr(cl, part).named_parameters(), strict=True
        ):
            scale = float(p_ref.grad.norm())
            error = float((p_cl.grad - p_ref.grad).norm())
            assert error <= 1e-3 * scale + 1e-7, f"{part}.{k}: relative gradient error {error / scale:.2g}"


TINY = {
    "name": "tiny-memory-format",
    "seed": 7,
    "data": {
        "dataset": "synthetic",
        "partition": "iid",
        "synthetic_train": 480,
        "synthetic_test": 160,
        "synthetic_channels": 3,
        "synthetic_image_size": 32,
    },
    "model": {"name": "alexnet", "alexnet_width_divisor": 4},
    "federation": {"num_clients": 6, "active_clients": 3},
    "train": {"global_iterations": 2, "local_iterations": 3, "batch_size": 16},
    "metrics": {"progress": False},
}
METHODS = {
    "gas": {"name": "gas", "params": {"q_s": 3, "q_c": 3, "covariance": "diagonal"}},
    "fedavg": {"name": "fedavg"},
}


def _metrics(out):
    rows = pq.read_table(out / "metrics.parquet").to_pylist()
    return [(r["iteration"], r["t"], r["accuracy"], r["loss"]) for r in rows]


def _scenario(method: str, memory_format: str, *overrides: str):
    doc = {**TINY, "algorithm": METHODS[method]}
    return scenario_from_dict(doc, [f"engine.memory_format={memory_format}", *overrides])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_channels_last_run_differs_from_contiguous_only_by_rounding(tmp_path, method):
    """Same events and virtual times (the layout changes no FLOP count and no byte count); accuracy and
    loss within float rounding grown over a few steps."""
    runs = {}
    for fmt in ("contiguous", "channels_last"):
        run(_scenario(method, fmt), tmp_path / fmt, backend="local")
        runs[fmt] = _metrics(tmp_path / fmt)
    ref, cl = runs["contiguous"], runs["channels_last"]
    assert [r[:2] for r in cl] == [r[:2] for r in ref]
    for (_, _, acc_cl, loss_cl), (_, _, acc_ref, loss_ref) in zip(cl, ref, strict=True):
        assert abs(acc_cl - acc_ref) <= 1 / 160  # at most one test image changes its prediction
        assert loss_cl == pytest.approx(loss_ref, abs=1e-4)
    ev = [pq.read_table(tmp_path / f / "events.parquet").to_pylist() for f in runs]
    assert [(e["t"], e["kind"], e["client"]) for e in ev[0]] == [
        (e["t"], e["kind"], e["client"]) for e in ev[1]
    ]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_channels_last_runs_are_identical_in_process_and_on_ray_pools(ray_session, tmp_path, method):
    """Ray ships tensors with their strides, so two pools see the layouts the in-process run sees."""
    run(_scenario(method, "channels_last"), tmp_path / "local", backend="local")
    run(_scenario(method, "channels_last", "engine.pools=2"), tmp_path / "ray", backend="ray")
    assert _metrics(tmp_path / "ray") == _metrics(tmp_path / "local")
    local = pq.read_table(tmp_path / "local" / "events.parquet").to_pylist()
    assert pq.read_table(tmp_path / "ray" / "events.parquet").to_pylist() == local


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_channels_last_run_resumes_to_the_same_metrics_and_events(tmp_path, method):
    """Restored weights and optimizer buffers keep their strides: crash after the first checkpoint, resume,
    end exactly where the uninterrupted channels-last run ends."""
    doc = apply_overrides(tiny(method, memory_format="channels_last"), ["metrics.tensorboard=false"])
    run_crash_and_resume(scenario_from_dict(doc), tmp_path)
