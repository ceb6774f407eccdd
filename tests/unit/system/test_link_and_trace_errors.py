"""Link options and trace files a user can get wrong: a ConfigError naming the field, never a traceback.

Impossible powers and path losses are refused when the scenario is built; options that together give a
rate of 0, infinity or an underflow are refused when the devices are drawn, naming the options behind the
rate, the client and the value; every problem of the trace file starts with ``system.trace_file``; a relative
trace path in a scenario file is relative to the file's folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from raysfl.config import ConfigError, build
from raysfl.scenario import load_scenario, scenario_to_dict
from raysfl.system import table as table_module
from raysfl.system.config import ComputeConfig, LinkConfig, SystemConfig
from raysfl.system.profiles import MIN_RATE, draw_devices
from raysfl.system.table import DeviceTable

HEADER = "client,flops_per_s,uplink_bps,downlink_bps\n"
ROWS = "".join(f"{k},{k + 1}e9,{k + 1}e6,{k + 1}e7\n" for k in range(4))


def _problems_building(link: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        build(SystemConfig, {"link": link}, "system")
    return err.value.problems


def _problems_drawing(cfg: SystemConfig, k: int = 8) -> list[str]:
    with pytest.raises(ConfigError) as err:
        draw_devices(cfg, k, np.random.default_rng(0))
    return err.value.problems


def _link(**changes) -> SystemConfig:
    return build(SystemConfig, {"link": changes}, "system")


# --- bounds on the options ---------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["tx_power_dbm", "server_tx_power_dbm"])
@pytest.mark.parametrize("value", [4000.0, 101.0, -100.5, -400.0])
def test_a_transmit_power_in_dbm_is_bounded_and_names_the_field(field, value):
    (problem,) = _problems_building({field: value})
    unset_by = field.removesuffix("_dbm") + "_w"
    assert problem == (
        f"system.link.{field}: {value!r} is out of range; give -100 to 100 dBm, or -inf (the default) to use "
        f"{unset_by}"
    )


def test_minus_inf_still_means_unset_and_powers_in_range_are_taken():
    cfg = _link(tx_power_dbm=-np.inf, server_tx_power_dbm=-np.inf)
    assert cfg.link.client_power_w == 0.2 and cfg.link.server_power_w == 0.2
    cfg = _link(tx_power_dbm=100.0, server_tx_power_dbm=-100.0)
    assert cfg.link.client_power_w == pytest.approx(1e7) and cfg.link.server_power_w == pytest.approx(1e-13)


@pytest.mark.parametrize(
    "field, value, bound",
    [
        ("path_loss_b_db", -10.0, ">= 0"),
        ("path_loss_a_db", -1.0, ">= 0"),
        ("noise_dbm_per_hz", 174.0, "<= 0"),
        ("noise_dbm_per_hz", -4000.0, ">= -250"),
    ],
)
def test_path_loss_and_noise_are_bounded(field, value, bound):
    (problem,) = _problems_building({field: value})
    assert problem == f"system.link.{field}: {value!r} is out of range; it must be {bound}"


# --- rates the options give --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, lead, columns, rate",
    [
        ({"tx_power_dbm": -100.0}, "system.link.tx_power_dbm: -100 gives", ["uplink"], "e-05 bit/s"),
        ({"server_tx_power_dbm": -100.0}, "system.link.server_tx_power_dbm: -100 gives", ["downlink"], ""),
        ({"noise_dbm_per_hz": 0.0}, "system.link.noise_dbm_per_hz: 0 gives", ["uplink", "downlink"], ""),
        ({"bandwidth_hz": 1e-300}, "system.link.bandwidth_hz: 1e-300 gives", ["uplink", "downlink"], "inf"),
        ({"radius_m": 1e300}, "system.link.radius_m: 1e+300 gives", ["uplink", "downlink"], "0 bit/s"),
        (  # rates that underflow to subnormal numbers, not to 0
            {"bandwidth_reduction": 1e308},
            "system.link.bandwidth_reduction: 1e+308 gives",
            ["uplink", "downlink"],
            "e-30",
        ),
    ],
)
def test_wireless_options_giving_no_usable_rate_are_named(changes, lead, columns, rate):
    problems = _problems_drawing(_link(**changes))
    assert len(problems) == len(columns)
    for problem, column in zip(problems, columns, strict=True):
        assert problem.startswith(f"{lead} client 0 {'an' if column == 'uplink' else 'a'} {column} rate of ")
        assert rate in problem and "(all 8 clients are out of range)" in problem
        assert f"a rate must be finite and at least {MIN_RATE:g} bit/s" in problem
        assert "With system.link.kind = 'wireless' it is set by system.link.{radius_m, " in problem
        assert problem.endswith("bandwidth_reduction} and federation.num_clients")  # W/K: shared bandwidth
        power = "tx_power" if column == "uplink" else "server_tx_power"
        power += "_dbm" if power + "_dbm" in changes else "_w"  # the power option in effect
        assert f" {power}, " in problem


def test_options_that_only_together_give_no_rate_are_named_together():
    (problem,) = _problems_drawing(_link(tx_power_dbm=-60.0, bandwidth_hz=1.0, bandwidth_mode="per-client"))
    assert problem.startswith(
        "system.link.tx_power_dbm, system.link.bandwidth_hz, system.link.bandwidth_mode: tx_power_dbm = -60, "
        "bandwidth_hz = 1, bandwidth_mode = 'per-client' give client 0 an uplink rate of "
    )
    assert "federation.num_clients" not in problem  # per-client bandwidth: K plays no part


def test_uniform_downlink_as_a_tiny_multiple_of_the_uplink_is_named():
    (problem,) = _problems_drawing(_link(kind="uniform", downlink_to_uplink=1e-320))
    assert problem.startswith(
        "system.link.downlink_to_uplink: 9.99989e-321 gives client 0 a downlink rate of "
    )
    assert problem.endswith(
        "With system.link.kind = 'uniform' it is set by "
        "system.link.{min_uplink_bps, max_uplink_bps, downlink_to_uplink, bandwidth_reduction}"
    )


def test_an_infinite_rate_from_finite_options_is_named():
    problems = _problems_drawing(_link(kind="uniform", max_uplink_bps=1e308, downlink_to_uplink=1e308))
    assert [p.split(": ")[0] for p in problems] == [
        "system.link.max_uplink_bps, system.link.downlink_to_uplink"
    ]
    assert "a downlink rate of inf bit/s" in problems[0]


def test_fixed_rates_below_one_bit_per_second_name_the_rate_option():
    problems = _problems_drawing(_link(kind="fixed", uplink_bps=0.5), k=1)
    assert problems == [
        "system.link.uplink_bps: 0.5 gives client 0 an uplink rate of 0.5 bit/s; a rate must be finite and "
        "at least 1 bit/s. With system.link.kind = 'fixed' it is set by "
        "system.link.{uplink_bps, bandwidth_reduction}"
    ]


def test_a_compute_ratio_that_underflows_names_the_compute_options():
    cfg = SystemConfig(compute=ComputeConfig(kind="ratio", ratio=1e300))
    (problem,) = _problems_drawing(cfg)
    assert problem.startswith("system.compute.ratio: 1e+300 gives client 0 a compute rate of ")
    assert "at least 1 FLOP/s" in problem
    assert problem.endswith("system.compute.{max_flops_per_s, ratio, ratio_sampling, pin_extremes}")


def test_only_the_bad_clients_are_counted(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,1e9,1e6,1e7\n1,1e9,50,1e7\n2,1e9,1e6,1e7\n3,1e9,20,1e7\n")
    link = LinkConfig(kind="trace", bandwidth_reduction=100.0)
    cfg = SystemConfig(link=link, compute=ComputeConfig(kind="trace"), trace_file=str(path))
    (problem,) = _problems_drawing(cfg, k=4)
    assert problem.startswith(
        "system.trace_file, system.link.bandwidth_reduction: "
        f"trace_file = '{path}', bandwidth_reduction = 100 give client 1 an uplink rate of 0.5 bit/s "
        "(2 of the 4 clients are out of range)"
    )
    assert problem.endswith("it is set by system.link.bandwidth_reduction and system.trace_file")


def test_usable_rates_draw_as_before():
    table = draw_devices(_link(tx_power_dbm=23.0), 8, np.random.default_rng(0))
    assert len(table) == 8 and table.uplink_bps.min() >= MIN_RATE


# --- trace files that cannot be read -----------------------------------------------------------------------


def _trace_problems(path: Path | str) -> list[str]:
    cfg = SystemConfig(compute=ComputeConfig(kind="trace"), trace_file=str(path))
    return _problems_drawing(cfg, k=4)


def test_a_directory_as_trace_file_names_the_field(tmp_path):
    assert _trace_problems(tmp_path) == [
        f"system.trace_file: {tmp_path}: is a directory; give the path of a CSV trace file"
    ]


def test_a_binary_trace_file_names_the_field_and_the_byte(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(HEADER.encode() + b"0,1e9,\xff\xfe,1e7\n")
    (problem,) = _trace_problems(path)
    assert problem == f"system.trace_file: {path}: not a UTF-8 text file (byte 0xff at offset 49); " + (
        "a trace is a CSV text file"
    )


def test_a_huge_trace_file_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(table_module, "MAX_TRACE_BYTES", 64)
    path = tmp_path / "t.csv"
    path.write_text(HEADER + ROWS)
    assert _trace_problems(path) == [
        f"system.trace_file: {path}: larger than 0 MiB; a trace is a CSV text file of some 80 bytes a client"
    ]


def test_a_cell_too_large_for_csv_names_the_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + ROWS + "4," + "1" * 200_000 + ",1e6,1e7\n")
    (problem,) = _trace_problems(path)
    assert problem.startswith(f"system.trace_file: {path}: line 6: not a valid CSV row (field larger than")


def test_a_missing_trace_names_the_field_and_the_file(tmp_path):
    assert _trace_problems(tmp_path / "gone.csv") == [
        f"system.trace_file: {tmp_path / 'gone.csv'}: trace file not found"
    ]


def test_row_problems_name_the_field_the_file_line_and_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,1e9,1e6,1e7\n1,fast,1e6,1e7\n2,1e9,1e6,1e7\n3,1e9,1e6,1e7\n")
    assert _trace_problems(path) == [
        f"system.trace_file: {path}: line 3, column 'flops_per_s': expected a number > 0, got 'fast'"
    ]


def test_a_trace_saved_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + ROWS).encode())
    assert DeviceTable.from_csv(path).flops_per_s.tolist() == [1e9, 2e9, 3e9, 4e9]


# --- where a relative trace path points --------------------------------------------------------------------

SCENARIO = """\
name = "traced"
[data]
dataset = "synthetic"
partition = "iid"
[model]
name = "lenet5"
[federation]
num_clients = 4
active_clients = 2
[system]
trace_file = "{trace}"
[system.compute]
kind = "trace"
"""


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """``tmp/project/scenarios/s.toml`` naming ``../traces/t.csv``; the working directory elsewhere."""
    project = tmp_path / "project"
    (project / "scenarios").mkdir(parents=True)
    (project / "traces").mkdir()
    (project / "traces" / "t.csv").write_text(HEADER + ROWS)
    scenario = project / "scenarios" / "s.toml"
    scenario.write_text(SCENARIO.format(trace="../traces/t.csv"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return project, scenario


def test_a_relative_trace_path_in_a_scenario_file_is_relative_to_the_file(layout):
    project, scenario = layout
    sc = load_scenario(scenario)
    assert sc.system.trace_file == str((project / "traces" / "t.csv").resolve())
    assert scenario_to_dict(sc)["system"]["trace_file"] == sc.system.trace_file  # config.toml records it
    table = draw_devices(sc.system, 4, np.random.default_rng(0))
    assert table.flops_per_s.tolist() == [1e9, 2e9, 3e9, 4e9]


def test_a_relative_trace_path_in_an_override_is_relative_to_the_working_directory(layout, tmp_path):
    project, scenario = layout
    (tmp_path / "elsewhere" / "mine.csv").write_text(HEADER + ROWS)
    sc = load_scenario(scenario, ["system.trace_file=mine.csv"])
    assert sc.system.trace_file == str((tmp_path / "elsewhere" / "mine.csv").resolve())
    sc = load_scenario(scenario, [f"system.trace_file={project / 'traces' / 't.csv'}"])  # absolute: as given
    assert sc.system.trace_file == str(project / "traces" / "t.csv")


def test_a_trace_path_that_cannot_be_resolved_is_refused_by_the_string_check(layout):
    _, scenario = layout
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario, ['system.trace_file="a\\u0000b.csv"'])
    (problem,) = err.value.problems
    assert problem == "system.trace_file: contains the control character U+0000; remove it"
    assert err.value.source == str(scenario)
