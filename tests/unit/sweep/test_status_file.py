"""``sweep.json`` is standard JSON: infinite and NaN numbers are tagged, and read back as numbers."""

import json
import math

from raysfl.sweep.execute import _trial_entries, read_status, status_text
from raysfl.sweep.spec import load_sweep


def _strict(text: str):
    """Parse as a reader that follows the JSON standard would (no NaN, Infinity or -Infinity)."""

    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_trials_entry_with_the_default_wireless_link_is_standard_json_and_reads_back(tmp_path):
    (tmp_path / "tiny.toml").write_text(
        'name = "t"\n[data]\ndataset = "synthetic"\n[model]\nname = "lenet5"\n'
        "[federation]\nnum_clients = 5\nactive_clients = 2\n"
    )
    (tmp_path / "s.toml").write_text('base = "tiny.toml"\n[grid]\nseed = [1, 2]\n')
    doc = {"trials": _trial_entries(load_sweep(tmp_path / "s.toml"))}
    assert doc["trials"]["seed1"]["scenario"]["system"]["link"]["tx_power_dbm"] == -math.inf
    text = status_text(doc)
    written = _strict(text)  # raises on -Infinity
    assert written["trials"]["seed1"]["scenario"]["system"]["link"]["tx_power_dbm"] == {"float": "-inf"}
    (tmp_path / "sweep.json").write_text(text)
    assert read_status(tmp_path / "sweep.json") == doc


def test_nan_and_infinities_anywhere_round_trip_and_an_older_files_infinity_reads_the_same(tmp_path):
    doc = {"a": [math.inf, 1.5, {"b": -math.inf}], "c": math.nan, "d": "inf", "e": {"float": "x"}}
    path = tmp_path / "sweep.json"
    path.write_text(status_text(doc))
    back = read_status(path)
    assert back["a"] == [math.inf, 1.5, {"b": -math.inf}] and math.isnan(back["c"])
    assert back["d"] == "inf" and back["e"] == {"float": "x"}  # only the tag is a number
    path.write_text('{"x": -Infinity}')  # what json.dumps wrote before
    assert read_status(path) == {"x": -math.inf}
