"""The split example: its equations, its client's recomputed backward, and the engine's guarantees for it.

Runs on synthetic data (the scenario file's data section overridden), so it needs no dataset.
"""

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from examples.fedasync_hinge.test_fedasync_hinge import outputs
from examples.sfl_staleness.method import SPEC, SplitClient, SplitServer, staleness_weight
from raysfl.api import RunSetup, check_spec
from raysfl.engine import runner
from raysfl.models.zoo import build_split_model
from raysfl.scenario import load_scenario
from tests.unit.engine.test_checkpoint_resume import crash_after

SCENARIO = Path(__file__).parent / "scenario.toml"
TINY = [
    "data.dataset=synthetic",
    "data.partition=iid",
    "data.synthetic_train=600",
    "data.synthetic_test=200",
    "federation.num_clients=6",
    "federation.active_clients=3",
    "train.global_iterations=12",
    "train.local_iterations=3",
    "train.batch_size=16",
    "train.eval_every=4",
    "metrics.progress=false",
]
CHECKPOINTED = [*TINY, "engine.checkpoint_every=4", "engine.keep_checkpoints=10"]


def _setup(overrides: list[str]) -> RunSetup:
    sc = load_scenario(SCENARIO, [*TINY, *overrides])
    return RunSetup(sc, sc.params, (1, 28, 28), 10, (np.arange(40),), None)


def _lenet():  # noqa: ANN202
    sc = load_scenario(SCENARIO, TINY)
    return build_split_model(sc.model, in_channels=1, image_size=28, num_classes=10, seed=0)


def test_the_staleness_weight_is_one_over_one_plus_tau_to_the_e():
    p = load_scenario(SCENARIO, [*TINY, "algorithm.params.exponent=2"]).params
    assert [staleness_weight(t, p) for t in (0, 1, 3)] == [1.0, 1 / 4, 1 / 16]
    constant = load_scenario(SCENARIO, [*TINY, 'algorithm.params.weighting="constant"']).params
    assert staleness_weight(7, constant) == 1.0


def test_the_server_mixes_a_client_part_in_with_mix_times_s_tau():
    setup = _setup(["algorithm.params.mix=0.5"])
    server = object.__new__(SplitServer)  # only the mixing rule: no model, no test set
    server.p, server.version, server.bases = setup.params, 0, {}
    server.global_client = {"w": torch.tensor([0.0, 4.0]), "n": torch.tensor(1)}
    server.send_model(1)  # client 1 starts at version 0
    server.send_model(2)
    server.receive(2, {"w": torch.tensor([2.0, 0.0]), "n": torch.tensor(5)})  # τ = 0: β = 0.5
    assert server.global_client["w"].tolist() == [1.0, 2.0] and server.global_client["n"].item() == 5
    server.receive(1, {"w": torch.tensor([4.0, 2.0]), "n": torch.tensor(6)})  # τ = 1: β = 0.5 / 2
    assert server.global_client["w"].tolist() == [1.75, 2.0] and server.version == 2


def test_a_stale_server_step_is_taken_at_eta_times_s_tau():
    """Two servers take the same step, one at τ = 0 and one at τ = 3 (s = 1/4): the change is 4× smaller."""
    setup = _setup(["train.momentum=0", "train.weight_decay=0"])
    torch.manual_seed(0)
    acts, y = torch.randn(8, 16, 5, 5), torch.randint(0, 10, (8,))
    moves = []
    for stale in (0, 3):
        server = SplitServer(setup, _lenet(), torch.zeros(1, 1, 28, 28), torch.zeros(1), 0, "cpu")
        before = copy.deepcopy(server.server_part.state_dict())
        server.send_model(0)
        server.version += stale
        grad = server.train_step(0, (acts, y))
        assert grad.shape == acts.shape
        moves.append(
            torch.cat([(w - before[n]).flatten() for n, w in server.server_part.state_dict().items()])
        )
    torch.testing.assert_close(moves[1], moves[0] / 4)
    assert moves[0].abs().max() > 0


class _Parts:
    """What the client factory reads of a split model: its client part."""

    def __init__(self, client: torch.nn.Module) -> None:
        self.client = client


@pytest.mark.parametrize("net", ["lenet5", "conv-bn-dropout"])
def test_the_recomputed_backward_steps_like_one_autograd_pass(net):
    """The client keeps its batch, not the graph; its step must equal forward + backward on one graph, with
    the dropout masks that were sent and BatchNorm statistics updated once."""
    setup = _setup(["train.momentum=0", "train.weight_decay=0"])
    torch.manual_seed(0)
    if net == "lenet5":
        model = _lenet()
    else:
        layers = (nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.5))
        model = _Parts(nn.Sequential(*layers))
    rng = np.random.default_rng(0)
    train_x = rng.integers(0, 256, (40, 1, 28, 28), dtype=np.uint8)
    transform = type("Identity", (), {"train": staticmethod(lambda x, gen: x.float() / 255)})()
    client = SplitClient(setup, model, train_x, rng.integers(0, 10, 40), transform)
    assert client.random == (net != "lenet5")
    st = client.init_state(0, np.arange(40), np.random.SeedSequence(1))
    start = {n: w.clone() for n, w in model.client.state_dict().items()}
    acts, _ = client.begin(st, start)
    x, rng_state = st.pending_x.clone(), st.pending_rng.clone()
    grad = torch.randn_like(acts)
    client.step(st, grad)
    reference = copy.deepcopy(model.client)
    reference.load_state_dict(start)
    reference.train()
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(rng_state)  # the masks the client drew for the activations it sent
        out = reference(x)
    torch.testing.assert_close(out.detach(), acts)
    out.backward(grad)
    for n, w in reference.named_parameters():
        torch.testing.assert_close(st.params[n], w.detach() - setup.scenario.train.lr * w.grad)
    for n, b in reference.named_buffers():  # one update of the running statistics, not two
        torch.testing.assert_close(st.buffers[n], b)
    if net != "lenet5":
        assert (acts == 0).float().mean() > 0.3  # dropout did drop


def test_the_spec_satisfies_the_protocols():
    assert check_spec(SPEC) == []


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sfl") / "local"
    summary = runner.run(load_scenario(SCENARIO, CHECKPOINTED), out, backend="local")
    assert summary["global_iterations"] == 12 and summary["stop_reason"] == "budget reached"
    return out


def test_it_learns_and_logs_every_step_of_every_job(local_run):
    metrics, events = outputs(local_run)
    assert [r["iteration"] for r in metrics] == [0, 4, 8, 12]
    assert metrics[-1]["accuracy"] > 0.3  # 10 classes: chance is 0.1
    assert all(0 < r["mean_step_weight"] <= 1 for r in metrics[1:])
    sizes = {e["bytes_up"] // (1600 + 8) for e in events if e["kind"] == "acts"}  # LeNet-5: 400 floats
    assert sizes == {16, 4}  # 100 samples a client, B = 16: six full batches, then 4 to end each epoch
    kinds = [e["kind"] for e in events]
    jobs = kinds.count("start")
    assert kinds.count("model") == 12 and jobs == 12 + 2  # 3 jobs run at once; 2 are open at the stop
    assert kinds.count("acts") >= 3 * 12 and kinds.count("grad") >= 3 * 12
    assert all(e["staleness"] >= 0 for e in events if e["kind"] in ("acts", "model"))
    assert any(e["staleness"] > 0 for e in events if e["kind"] == "model")


def test_it_resumes_from_a_checkpoint_to_the_same_numbers(local_run, tmp_path):
    crashed = crash_after(local_run, tmp_path / "crashed", "ckpt-000004.pt")
    resumed = runner.run(load_scenario(SCENARIO, CHECKPOINTED), crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == "ckpt-000004.pt"
    assert outputs(crashed) == outputs(local_run)


def test_ray_pools_match_the_local_run(ray_session, local_run, tmp_path):
    """Two pools and the server actor import the method by its path; client states stay in their pool."""
    sc = load_scenario(SCENARIO, [*TINY, "engine.pools=2"])
    runner.run(sc, tmp_path / "ray", backend="ray")
    assert outputs(tmp_path / "ray") == outputs(local_run)
