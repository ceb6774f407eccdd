"""The system section's options: defaults, validation messages, dBm overrides, TOML round trip."""

import tomllib

import pytest

from raysfl.config import ConfigError, build, dumps_toml, to_dict
from raysfl.system.config import LinkConfig, SystemConfig


def test_defaults_are_gas_device_model_paper_variant():
    cfg = SystemConfig()
    assert (cfg.compute.kind, cfg.compute.min_flops_per_s, cfg.compute.max_flops_per_s) == (
        "uniform",
        1e9,
        1e10,
    )
    link = cfg.link
    assert (link.kind, link.radius_m, link.min_distance_m, link.bandwidth_hz) == (
        "wireless",
        1000.0,
        100.0,
        1e7,
    )
    assert (link.placement, link.bandwidth_mode) == ("area", "shared")
    assert (link.client_power_w, link.noise_dbm_per_hz) == (0.2, -174.0)
    assert (cfg.timing.flops_accounting, cfg.timing.free_downloads) == ("per-batch", False)
    assert cfg.server_flops_per_s == 0.0


def test_dbm_overrides_watts():
    link = LinkConfig(tx_power_dbm=23.0, server_tx_power_dbm=37.0)
    assert link.client_power_w == pytest.approx(0.19953, rel=1e-4)
    assert link.server_power_w == pytest.approx(5.0119, rel=1e-4)
    assert LinkConfig(server_tx_power_w=1.5).server_power_w == 1.5


def test_toml_round_trip():
    cfg = SystemConfig(link=LinkConfig(tx_power_dbm=23.0, bandwidth_mode="per-client"))
    text = dumps_toml({"system": to_dict(cfg)})
    assert "tx_power_dbm = 23.0" in text and "server_tx_power_dbm = -inf" in text
    assert build(SystemConfig, tomllib.loads(text)["system"], "system") == cfg


def test_errors_name_paths_and_allowed_values():
    with pytest.raises(ConfigError) as err:
        build(
            SystemConfig,
            {"link": {"placement": "disc", "bandwith_hz": 5e6}, "compute": {"ratio": 0.5}},
            "system",
        )
    problems = err.value.problems
    assert any(
        p.startswith("system.link.placement: 'disc' is not allowed; choose one of 'area'") for p in problems
    )
    assert "system.link.bandwith_hz: unknown key (did you mean 'bandwidth_hz'?)" in problems
    assert any(p.startswith("system.compute.ratio: 0.5 is out of range") for p in problems)


def test_empty_ranges_and_missing_trace_file():
    with pytest.raises(ConfigError, match="system.compute: min_flops_per_s .* exceeds max_flops_per_s"):
        build(SystemConfig, {"compute": {"min_flops_per_s": 2e10}}, "system")
    with pytest.raises(ConfigError, match="min_distance_m .* exceeds radius_m"):
        build(SystemConfig, {"link": {"radius_m": 50}}, "system")
    with pytest.raises(ConfigError, match="compute.kind and link.kind = 'trace' needs system.trace_file"):
        build(SystemConfig, {"compute": {"kind": "trace"}, "link": {"kind": "trace"}}, "system")
    assert build(SystemConfig, {"link": {"kind": "trace"}, "trace_file": "t.csv"}).trace_file == "t.csv"


def test_ranges_are_checked_only_for_the_kind_that_reads_them():
    """A wireless cell's radius is not a fixed link's business (a sweep may switch kinds on one base)."""
    fixed = build(SystemConfig, {"link": {"kind": "fixed", "radius_m": 50}}, "system")
    assert fixed.link.radius_m == 50
    fixed_compute = {"compute": {"kind": "fixed", "min_flops_per_s": 2e10}}
    assert build(SystemConfig, fixed_compute, "system").compute.min_flops_per_s == 2e10
    with pytest.raises(ConfigError, match="min_uplink_bps .* exceeds max_uplink_bps"):
        build(SystemConfig, {"link": {"kind": "uniform", "min_uplink_bps": 3e7}}, "system")
    # the downlink range is not read when the downlink is a multiple of the uplink
    tied = {"link": {"kind": "uniform", "min_downlink_bps": 1e9, "downlink_to_uplink": 5.0}}
    assert build(SystemConfig, tied, "system").link.downlink_to_uplink == 5.0
    with pytest.raises(ConfigError, match="min_downlink_bps .* exceeds max_downlink_bps"):
        build(SystemConfig, {"link": {"kind": "uniform", "min_downlink_bps": 1e9}}, "system")
