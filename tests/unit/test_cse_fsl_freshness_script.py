"""benchmarks/cse_fsl_upload_freshness.py: round 1 against the engine's, the fit it measures, its summary."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.conftest import on_sys_path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = str(ROOT / "scenarios/cse_fsl/table5/cifar10_iid_cse_fsl_h5_quick.toml")
TINY = [
    'data.dataset="synthetic"',
    "data.synthetic_train=600",
    "data.synthetic_test=200",
    'model.aux="mlp"',
    "train.global_iterations=2",
    "algorithm.params.h=1",  # 3 uploads per client and round: the serving order matters
]


@pytest.fixture(scope="module")
def script():
    with on_sys_path(ROOT / "benchmarks"):
        yield importlib.import_module("cse_fsl_upload_freshness")


def test_round_1_of_the_forward_and_updated_servers_is_the_engines_under_the_two_readings(
    script, tmp_path, capsys
):
    """--check runs the engine's round 1 (local backend, round-robin order) with recompute_after_update false
    and true and requires its accuracies to equal the 'forward' and 'updated' servers' exactly (later rounds
    start from client models averaged in another order, so only round 1 is compared)."""
    out = tmp_path / "rows.csv"
    assert script.main([SCENARIO, *TINY, "--out", str(out), "--check"]) == 0
    printed = capsys.readouterr().out
    assert "equal to 'forward'" in printed and "equal to 'updated'" in printed
    rows = out.read_text().splitlines()
    assert len(rows) == 1 + 3  # header, the initial evaluation and two rounds
    header = rows[0].split(",")
    for kind in script.KINDS:
        assert {f"acc_{kind}", f"server_loss_{kind}", f"aux_loss_{kind}", f"aux_acc_{kind}"} <= set(header)


def test_summarize_pairs_the_last_evaluations_of_each_run(script, tmp_path, capsys):
    """Two runs' CSVs: the paired 'updated − forward' difference over the last 2 evaluations, by hand."""
    head = "round,acc_forward,acc_updated,acc_unseen," + ",".join(
        f"{m}_{k}" for m in ("aux_acc", "aux_loss", "server_loss") for k in script.KINDS
    )
    losses = ",".join(["0.5"] * 9)
    runs = {
        "a.csv": ["0,0.1,0.1,0.1," + losses, "1,0.30,0.40,0.35," + losses, "2,0.50,0.60,0.45," + losses],
        "b.csv": ["0,0.1,0.1,0.1," + losses, "1,0.30,0.30,0.30," + losses, "2,0.40,0.44,0.40," + losses],
    }
    for name, rows in runs.items():
        (tmp_path / name).write_text("\n".join([head, *rows]) + "\n")
    assert script.main(["--summarize", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--last", "2"]) == 0
    out = capsys.readouterr().out
    # a: ((40 + 60) − (30 + 50)) / 2 = +10; b: ((30 + 44) − (30 + 40)) / 2 = +2; mean +6, std √32 = 5.66
    assert "| updated − forward | +6.00 ± 5.66 |" in out
    assert "| 2 of 2 |" in out


def test_the_updated_clients_activations_of_the_batch_it_just_fitted_fit_its_head_best(script):
    """After a step on (z, y), the updated client and head fit z better than the pre-step pair did (the
    step's own loss) and than a batch the client has not just trained on (the control)."""
    sc = script.load_scenario(SCENARIO, TINY)
    rows = script.run(sc, None)
    for row in rows[1:]:
        assert row["aux_loss_updated"] < row["aux_loss_forward"]
        assert row["aux_loss_updated"] < row["aux_loss_unseen"]


def test_other_methods_and_partial_participation_are_refused_by_name(script):
    sc = script.load_scenario(SCENARIO, [*TINY, "federation.active_clients=2"])
    with pytest.raises(SystemExit, match="federation.active_clients"):
        script.check_scenario(sc)
    with pytest.raises(SystemExit, match="algorithm.name must be 'cse_fsl', got 'gas'"):
        script.check_scenario(script.load_scenario(str(ROOT / "scenarios/default.toml")))
