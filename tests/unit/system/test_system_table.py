"""DeviceTable: rows, summary, CSV trace round trip and the errors a bad trace gives."""

import numpy as np
import pytest

from raysfl.config import ConfigError
from raysfl.system.config import ComputeConfig, SystemConfig
from raysfl.system.profiles import draw_devices
from raysfl.system.table import DeviceTable, describe_devices


@pytest.fixture
def wireless_table() -> DeviceTable:
    return draw_devices(SystemConfig(), 8, np.random.default_rng(1))


@pytest.fixture
def plain_table() -> DeviceTable:
    return DeviceTable(np.array([1e9, 4e9, 2e9]), np.array([1e7, 2e7, 4e7]), np.array([5e7, 5e7, 1e8]))


def write(path, text: str):
    path.write_text(text)
    return path


def test_rows_and_summary(plain_table):
    rows = plain_table.to_rows()
    assert rows[1] == {"client": 1, "flops_per_s": 4e9, "uplink_bps": 2e7, "downlink_bps": 5e7}
    s = plain_table.summary()
    assert s["num_clients"] == 3
    assert s["flops_per_s"] == {"min": 1e9, "median": 2e9, "max": 4e9, "ratio": 4.0}
    assert s["uplink_bps"]["ratio"] == 4.0
    assert "distance_m" not in s
    assert DeviceTable.from_rows(rows) == plain_table


def test_wireless_rows_carry_distances(wireless_table):
    rows = wireless_table.to_rows()
    assert all("distance_m" in r for r in rows)
    assert DeviceTable.from_rows(rows) == wireless_table
    assert wireless_table.summary()["distance_m"]["max"] <= 1000.0


@pytest.mark.parametrize("name", ["wireless_table", "plain_table"])
def test_csv_round_trip_is_exact(tmp_path, request, name):
    table = request.getfixturevalue(name)
    path = tmp_path / "trace.csv"
    table.to_csv(path)
    header = path.read_text().splitlines()[0]
    assert header.startswith("client,flops_per_s,uplink_bps,downlink_bps")
    assert header.endswith("distance_m") == table.wireless
    assert DeviceTable.from_csv(path) == table


def test_csv_rows_in_any_order_and_extra_clients(tmp_path):
    path = write(
        tmp_path / "t.csv",
        "client,flops_per_s,uplink_bps,downlink_bps\n2,3e9,3e6,3e7\n0,1e9,1e6,1e7\n1,2e9,2e6,2e7\n",
    )
    t = DeviceTable.from_csv(path)
    np.testing.assert_array_equal(t.flops_per_s, [1e9, 2e9, 3e9])
    assert len(DeviceTable.from_csv(path, num_clients=2)) == 2


def test_table_arrays_are_read_only(plain_table):
    with pytest.raises(ValueError):
        plain_table.flops_per_s[0] = 1.0


def test_table_rejects_bad_arrays():
    with pytest.raises(ValueError, match="uplink_bps has 1 entries, expected 2"):
        DeviceTable(np.array([1e9, 1e9]), np.array([1e6]), np.array([1e6, 1e6]))
    with pytest.raises(ValueError, match=r"downlink_bps\[1\]"):
        DeviceTable(np.array([1e9, 1e9]), np.array([1e6, 1e6]), np.array([1e6, 0.0]))


def test_missing_trace_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.csv: trace file not found"):
        DeviceTable.from_csv(tmp_path / "nope.csv")


def test_missing_trace_through_draw_devices(tmp_path):
    cfg = SystemConfig(compute=ComputeConfig(kind="trace"), trace_file=str(tmp_path / "gone.csv"))
    with pytest.raises(ConfigError, match="gone.csv: trace file not found"):
        draw_devices(cfg, 3, np.random.default_rng(0))


def test_empty_trace(tmp_path):
    path = write(tmp_path / "empty.csv", "")
    with pytest.raises(ConfigError, match="empty.csv: trace file is empty"):
        DeviceTable.from_csv(path)


def test_missing_column_names_it(tmp_path):
    path = write(tmp_path / "cols.csv", "client,flops_per_s,uplink_bps\n0,1e9,1e6\n")
    with pytest.raises(ConfigError, match=r"cols.csv: line 1 \(header\): missing column\(s\) downlink_bps"):
        DeviceTable.from_csv(path)


def test_malformed_values_name_file_line_and_column(tmp_path):
    path = write(
        tmp_path / "bad.csv",
        "client,flops_per_s,uplink_bps,downlink_bps\n0,1e9,1e6,1e7\n1,2e9,fast,2e7\nx,3e9,3e6,-1\n",
    )
    with pytest.raises(ConfigError) as err:
        DeviceTable.from_csv(path)
    problems = err.value.problems
    assert f"{path}: line 3, column 'uplink_bps': expected a number > 0, got 'fast'" in problems
    assert any(p.startswith(f"{path}: line 4, column 'client'") for p in problems)
    assert f"{path}: line 4, column 'downlink_bps': expected a finite number > 0, got '-1'" in problems


def test_short_row_and_surplus_cells(tmp_path):
    path = write(
        tmp_path / "short.csv", "client,flops_per_s,uplink_bps,downlink_bps\n0,1e9,1e6\n1,1e9,1e6,1e6,9\n"
    )
    with pytest.raises(ConfigError) as err:
        DeviceTable.from_csv(path)
    assert f"{path}: line 2, column 'downlink_bps': missing value" in err.value.problems
    assert any("line 3: more cells than" in p for p in err.value.problems)


def test_short_trace_names_the_missing_clients(tmp_path):
    path = write(
        tmp_path / "few.csv", "client,flops_per_s,uplink_bps,downlink_bps\n0,1e9,1e6,1e7\n1,1e9,1e6,1e7\n"
    )
    with pytest.raises(ConfigError, match=r"few.csv: column 'client': no row for client\(s\) 2, 3, 4"):
        DeviceTable.from_csv(path, num_clients=5)


def test_duplicate_client(tmp_path):
    path = write(
        tmp_path / "dup.csv", "client,flops_per_s,uplink_bps,downlink_bps\n0,1e9,1e6,1e7\n0,1e9,1e6,1e7\n"
    )
    with pytest.raises(
        ConfigError, match="dup.csv: line 3, column 'client': client 0 already given on line 2"
    ):
        DeviceTable.from_csv(path)


def test_describe_devices(wireless_table, plain_table):
    text = describe_devices(wireless_table)
    lines = text.splitlines()
    assert lines[0].split() == ["client", "GFLOP/s", "distance", "m", "up", "Mb/s", "down", "Mb/s"]
    assert len(lines) == 2 + 8 + 1
    assert lines[-1].startswith("8 clients; compute ")
    assert "slowest/fastest" in lines[-1]
    assert "-" in describe_devices(plain_table).splitlines()[2]  # no distance
    short = describe_devices(wireless_table, max_rows=4).splitlines()
    assert len(short) == 2 + 4 + 1 + 1
    assert "(4 more)" in short[4]


def test_describe_devices_units_by_hand():
    """1e9 FLOP/s is 1 GFLOP/s, 1e7 bit/s 10 Mb/s: each row and the summary line in the table's units."""
    table = DeviceTable(np.array([1e9, 4e9, 1e10]), np.array([1e7, 2e6, 5e7]), np.array([5e7, 1e7, 2.5e8]))
    lines = describe_devices(table).splitlines()
    assert [line.split() for line in lines[2:5]] == [
        ["0", "1.000", "-", "10.000", "50.000"],
        ["1", "4.000", "-", "2.000", "10.000"],
        ["2", "10.000", "-", "50.000", "250.000"],
    ]
    assert lines[5] == (
        "3 clients; compute 1 to 10 (median 4) GFLOP/s, slowest/fastest 10.00; "
        "up 2 to 50 (median 10) Mb/s; down 10 to 250 (median 50) Mb/s"
    )
