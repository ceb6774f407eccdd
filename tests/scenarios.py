"""Scenarios shared by test modules of both suites (unit and integration)."""

import copy

from raysfl.config import dumps_toml

TINY_GAS = {
    "name": "tiny-gas-ray",
    "seed": 11,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 4},
    "train": {"global_iterations": 2, "local_iterations": 3, "batch_size": 16},
    "algorithm": {"name": "gas", "params": {"q_s": 4, "q_c": 4, "covariance": "full"}},
    "metrics": {"progress": False},
}
"""A GAS run of a few seconds on the synthetic dataset: two global iterations of four active clients."""


def tiny_gas_toml(global_iterations: int) -> str:
    """A scenario file's text for a GAS run of seconds on the synthetic dataset, the base of the sweep tests'
    sweeps: :data:`TINY_GAS` named "tiny", with ``global_iterations`` and GAS's default covariance."""
    scenario = copy.deepcopy(TINY_GAS)
    scenario["name"] = "tiny"
    scenario["train"]["global_iterations"] = global_iterations
    del scenario["algorithm"]["params"]["covariance"]
    return dumps_toml(scenario)
