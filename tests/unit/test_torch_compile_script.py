"""benchmarks/torch_compile.py: the models and steps it times are the ones a run trains.

Only the eager forms run here (compiling AlexNet takes minutes on two cores and needs a C++ compiler); the
compiled forms are checked to wrap the model, which ``torch.compile`` does without compiling yet.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from raysfl.models.zoo import build_split_model
from raysfl.scenario import load_scenario
from tests.conftest import on_sys_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    """The script imported as ``python benchmarks/torch_compile.py`` would (benchmarks/ on sys.path)."""
    with pytest.MonkeyPatch.context() as mp, on_sys_path(ROOT / "benchmarks"):
        mp.setenv("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # its import sets this; undone afterwards
        yield importlib.import_module("torch_compile")


def test_its_models_are_the_peer_benchmarks_alexnet_and_server_part(script):
    scenario = load_scenario(ROOT / "scenarios/bench/fedavg_peer.toml")
    assert (scenario.model.name, scenario.model.split) == ("alexnet", "L2")
    full, server = script.alexnet_parts()
    split = build_split_model(scenario.model, 1, 28, 10, seed=2023)
    for mine, theirs in ((full, split.full()), (server, split.server)):
        assert [p.shape for p in mine.parameters()] == [p.shape for p in theirs.parameters()]
        assert all(torch.equal(a, b) for a, b in zip(mine.parameters(), theirs.parameters(), strict=True))
    x = torch.randn(4, 1, 28, 28)
    assert full(x).shape == (4, 10)
    assert server(torch.randn(4, 64, 7, 7)).shape == (4, 10)  # the activations GAS's server update takes


def test_a_training_step_is_one_sgd_step_with_momentum_and_weight_decay(script):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    w0 = model.weight.detach().clone()
    x, y = torch.randn(5, 3), torch.tensor([0, 1, 1, 0, 1])
    grad = torch.autograd.grad(F.cross_entropy(model(x), y), model.weight)[0]
    script.training_step(model, x, y)()
    # the first SGD step with momentum: w − lr · (g + wd · w), the momentum buffer starting at that gradient
    assert torch.allclose(model.weight, w0 - 0.01 * (grad + 5e-4 * w0), atol=1e-7)


def test_the_channels_last_form_trains_the_same_numbers_in_the_other_layout(script):
    torch.manual_seed(0)
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    eager = script.in_form(script.alexnet_parts()[0], "eager")
    last = script.in_form(script.alexnet_parts()[0], "eager, channels-last")
    convs = [m.weight for m in last.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    for model in (eager, last):
        script.training_step(model, x, y)()
    for a, b in zip(eager.parameters(), last.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # layout changes only the last bits


def test_the_compiled_forms_wrap_the_model_without_compiling_it_yet(script):
    full = script.alexnet_parts()[0]
    compiled = script.in_form(full, "compiled")
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    assert compiled._orig_mod is full
    assert script.FORMS == ("eager", "eager, channels-last", "compiled", "compiled, channels-last")
