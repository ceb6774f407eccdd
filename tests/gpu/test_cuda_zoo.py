"""Every zoo model's server part on a real GPU: one training step computes the same bits twice.

``tests/gpu/test_cuda_server.py`` runs every *method* on the GPU, all with the tiny LeNet-5; the scenarios
run the zoo's other models (AlexNet, the VGGs, the ResNets, ViT, the CSE-FSL and FedASMU networks), whose
layers call other CUDA kernels. Here, for every zoo model at every split, with the server's settings
(:func:`raysfl.engine.hosts.deterministic_cuda`), the server part takes a minibatch of cut-layer
activations twice from the same state: forward, cross-entropy, backward, an SGD step with momentum. The
loss, the gradient sent back to the client, every parameter gradient and the updated parameters must be
equal bit for bit, and no kernel may report that it has no deterministic implementation (with
``warn_only=True`` such a kernel runs anyway and warns; those warnings are collected per model). The full
model's forward (an evaluation) must repeat too. In float32, in float32 with channels-last weights, and under
bfloat16 autocast (``engine.precision``).

Skipped without CUDA; ``RAYSFL_TEST_SERVER_DEVICE=cpu`` runs it on the CPU (a dry run: the same code,
deterministic there anyway). With ``RAYSFL_GPU_REPORT=DIR`` the warnings found are written to
``DIR/gpu_zoo.json``.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

from raysfl.engine.hosts import deterministic_cuda
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import MODELS, build_split_model
from tests.gpu.test_cuda_server import DEVICE, _report

pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(), reason="torch sees no CUDA device"
)
BATCH = 32
NUM_CLASSES = 10
# (precision, memory format) as engine.precision and engine.memory_format name them
VARIANTS = [("float32", "contiguous"), ("float32", "channels_last"), ("bfloat16", "contiguous")]
CASES = [(name, split) for name, entry in MODELS.items() for split in entry.splits]


def _nondeterministic(caught: list[warnings.WarningMessage]) -> list[str]:
    return sorted({str(w.message).split(" does not")[0] for w in caught if "deterministic" in str(w.message)})


def _step(server: nn.Module, acts: torch.Tensor, labels: torch.Tensor, seed: int) -> list[torch.Tensor]:
    """One server step (what a split method's server does per minibatch); the bits it produces."""
    torch.manual_seed(seed)  # dropout masks: the same on both runs (seeds the CUDA generator too)
    opt = torch.optim.SGD(server.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    a = acts.clone().requires_grad_(True)
    loss = nn.functional.cross_entropy(server(a), labels)
    loss.backward()
    grads = [p.grad.clone() for p in server.parameters() if p.grad is not None]
    opt.step()
    return [loss.detach(), a.grad, *grads, *(p.detach().clone() for p in server.parameters())]


@pytest.mark.parametrize(("precision", "memory_format"), VARIANTS)
@pytest.mark.parametrize(("name", "split"), CASES)
def test_a_server_step_of_every_zoo_model_repeats_bit_for_bit(name, split, precision, memory_format):
    if DEVICE == "cuda":
        deterministic_cuda()
    entry = MODELS[name]
    channels, size, _ = entry.inputs[0]
    cfg = ModelConfig(name=name, split=split)
    model = build_split_model(cfg, channels, size, NUM_CLASSES, seed=5)
    model.use_memory_format(memory_format).use_precision(precision)
    device = torch.device(DEVICE)
    model.client.to(device)
    model.server.to(device)
    gen = torch.Generator().manual_seed(11)
    images = torch.rand((BATCH, channels, size, size), generator=gen).to(device)
    labels = torch.randint(0, NUM_CLASSES, (BATCH,), generator=gen).to(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.client.eval()
        model.server.eval()
        with torch.no_grad():
            acts = model.client(images)
            logits = [model.server(acts).clone() for _ in range(2)]
        model.server.train()
        first, second = (_step(copy.deepcopy(model.server), acts, labels, seed=7) for _ in range(2))
        if DEVICE == "cuda":
            torch.cuda.synchronize()
    kernels = _nondeterministic(caught)
    _report("gpu_zoo.json", f"{name}/{split}/{precision}/{memory_format}", kernels)
    assert torch.equal(logits[0], logits[1])
    assert len(first) == len(second) and all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not kernels, f"kernels without a deterministic implementation: {kernels}"
