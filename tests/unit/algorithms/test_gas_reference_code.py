"""GAS's reference-code options do what the public code does (issue 18; specs/gas.md §10.3-§10.6).

Each test works a short sequence by hand from the code's rules and checks raysfl against it:
the code's clock constants (``Client.model_process`` / ``transmit_activation`` / ``transmit_model``).
"""

from __future__ import annotations

import numpy as np
import pytest

from raysfl.algorithms.actions import Event, Log, Schedule
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.gas.policy import GASPolicy
from raysfl.config import ConfigError
from raysfl.scenario import scenario_from_dict
from raysfl.system.config import TimingConfig
from raysfl.system.durations import TimeModel
from raysfl.system.table import DeviceTable

# The GAS code's constants (specs/gas.md §10.3): W_c per pass, bits per activation sample, model bits.
W_C, S_ACT, S_MODEL = 5_603_328, 131_072, 620_544
CODE_CLOCK = {
    "flops_accounting": "per-sample",
    "free_downloads": True,
    "client_pass_flops": W_C,
    "activation_bits": S_ACT,
    "client_model_bits": S_MODEL,
}
# Measured AlexNet L2 costs on 1×28×28 Fashion-MNIST (raysfl.models.flops; 2 FLOPs per multiply-add).
FMNIST_L2 = SplitCosts(
    client_forward_flops=7_676_928.0,
    client_backward_flops=14_902_272.0,
    server_forward_flops=99_706_880.0,
    server_backward_flops=199_413_760.0,
    activation_bytes=12_544,
    client_model_bytes=75_264,
    full_model_bytes=15_472_680,
)


def _scenario(params=None, timing=None, **train):
    return scenario_from_dict(
        {
            "data": {"dataset": "synthetic", "synthetic_classes": 3, "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 2, "active_clients": 1},
            "train": {"local_iterations": 2, "batch_size": 32, **train},
            "algorithm": {"name": "gas", "params": params or {}},
            "system": {"timing": timing or {}},
        }
    )


# --- 1. the code's clock ------------------------------------------------------------------------------


def test_constant_charges_replace_the_measured_costs():
    """W_c for forward and backward alike; B·131,072 bits per activation upload, no labels; 620,544 bits."""
    code = FMNIST_L2.charged(TimingConfig(**CODE_CLOCK), batch_size=32)
    assert code.client_forward_flops == code.client_backward_flops == 5_603_328
    assert code.upload_bytes(32) == code.upload_bytes(24) == 32 * 131_072 // 8  # configured B, labels free
    assert code.gradient_bytes(24) == 32 * 131_072 // 8
    assert code.client_model_bytes == 620_544 // 8
    assert code.server_forward_flops == FMNIST_L2.server_forward_flops  # the server is not the code's
    # with no constant set nothing changes: the measured float32 activations + int64 labels of the batch
    assert FMNIST_L2.charged(TimingConfig(flops_accounting="per-sample"), 32) == FMNIST_L2
    assert FMNIST_L2.upload_bytes(24) == 24 * (12_544 + 8)


def test_gas_policy_runs_the_codes_clock():
    """One job of E = 2 on f = 5e9 FLOP/s, R = 4.194304e7 bit/s, by hand from the code's three methods.

    The client holds 40 samples, so its second batch has 8; the code still charges B = 32 (its
    ``minibatch`` attribute). Per-sample accounting of the *measured* FLOPs would instead charge
    7,676,928 / f forward and 14,902,272 / f backward, and 12,552 bytes per sample.
    """
    f, rate = 5e9, 4.194304e7
    sc = _scenario(timing=CODE_CLOCK)
    setup = RunSetup(sc, sc.params, (1, 28, 28), 3, (tuple(range(40)), tuple(range(40, 80))), np.ones((2, 3)))
    tm = TimeModel(DeviceTable(np.full(2, f), np.full(2, rate), np.full(2, rate)), sc.system.timing)
    policy = GASPolicy(setup, tm, FMNIST_L2, np.random.default_rng(0))
    compute = 5_603_328 / f  # model_process: one image's workload per pass
    upload = 32 * 131_072 / rate  # transmit_activation: 131,072 bits × minibatch
    model = 620_544 / rate  # transmit_model

    (act1,) = [a for a in policy.start() if isinstance(a, Schedule)]
    k = act1.client
    assert act1.t == pytest.approx(compute + upload, rel=1e-15)  # download free
    acts = policy.on_event(Event(act1.t, "act", k, act1.data))
    (act2,) = [a for a in acts if isinstance(a, Schedule)]
    assert act2.data["b"] == 8
    assert act2.t == pytest.approx(act1.t + compute + compute + upload, rel=1e-15)  # bwd, fwd, upload
    log = next(a.row for a in acts if isinstance(a, Log))
    assert log["bytes_up"] == 32 * 131_072 // 8
    acts = policy.on_event(Event(act2.t, "act", k, act2.data))
    (done,) = [a for a in acts if isinstance(a, Schedule)]
    assert done.kind == "model"
    assert done.t == pytest.approx(act2.t + compute + model, rel=1e-15)  # last backward, model upload
    assert done.t == pytest.approx(4 * 0.0011206656 + 2 * 0.1 + 620_544 / 4.194304e7, rel=1e-12)


def test_constant_charges_are_validated():
    """Whole bytes only, and only for gas: another method would silently ignore them."""
    with pytest.raises(ConfigError) as err:
        _scenario(timing={"activation_bits": 131_071})
    assert err.value.problems == [
        "system.timing: activation_bits = 131071 is not a whole number of bytes; use a multiple of 8 bits"
    ]
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(
            {
                "algorithm": {"name": "fedbuff"},
                "model": {"name": "lenet5"},
                "data": {"dataset": "synthetic"},
                "system": {"timing": {"client_pass_flops": W_C}},
            }
        )
    assert (
        "system.timing.client_pass_flops: 5603328 is the GAS code's constant charge, read by algorithm "
        "'gas' only (not 'fedbuff'); use 0, the measured FLOPs and bytes"
    ) in err.value.problems
