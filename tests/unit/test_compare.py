"""`raysfl run` on a set of scenarios and `raysfl compare` on the results."""

import json
from pathlib import Path

import pytest

from raysfl.cli import main
from raysfl.compare import (
    RunRecord,
    accuracy_gain,
    compare_table,
    convergence_accuracy,
    load_run,
    speed_gain,
    time_to_accuracy,
)

TINY = """
name = "{name}"
seed = {seed}
[data]
dataset = "synthetic"
synthetic_train = 400
synthetic_test = 100
[model]
name = "lenet5"
[federation]
num_clients = 10
active_clients = 2
[train]
global_iterations = 2
local_iterations = 2
batch_size = 16
[algorithm.params]
q_s = 2
q_c = 2
covariance = "diagonal"
[metrics]
progress = false
tensorboard = false
[reference]
accuracy = 90.66
std = 0.2
source = "GAS Table 1 (for the test only)"
"""


def test_run_a_directory_then_compare(tmp_path, capsys):
    folder = tmp_path / "set"
    folder.mkdir()
    for name, seed in (("a", 1), ("b", 2)):
        (folder / f"{name}.toml").write_text(TINY.format(name=name, seed=seed))
    out = tmp_path / "runs"
    assert (
        main(["run", str(folder), "train.global_iterations=1", "--backend", "local", "--out", str(out)]) == 0
    )
    assert sorted(p.name for p in out.iterdir()) == ["a", "b"]
    rec = load_run(out / "a")
    assert rec.reference["accuracy"] == 90.66 and len(rec.curve) == 2  # iterations 0 and 1 (override applied)
    capsys.readouterr()
    assert main(["compare", str(out), "--target", "0.01"]) == 0
    table = capsys.readouterr().out
    assert table.count("\n| ") == 2  # one line per run after the header
    assert "90.66 ± 0.20" in table and "s to 1 %" in table and "synthetic" in table
    # an interrupted run is marked, and said; a target that is no accuracy is refused
    summary = json.loads((out / "b" / "summary.json").read_text())
    (out / "b" / "summary.json").write_text(json.dumps({**summary, "interrupted": True}))
    assert main(["compare", str(out)]) == 0
    captured = capsys.readouterr()
    assert "| b (interrupted) |" in captured.out and "| a |" in captured.out
    assert f"compare: {out / 'b'} was interrupted before its budget" in captured.err
    (out / "b" / "summary.json").unlink()  # a run that failed or is still running
    assert main(["compare", str(out)]) == 0
    captured = capsys.readouterr()
    assert "| a |" in captured.out and "\n| b " not in captured.out
    assert f"compare: left out {out / 'b'}: unfinished (no summary.json)" in captured.err
    for bad in ("8", "0", "-0.5"):
        assert main(["compare", str(out), "--target", bad]) == 2
        assert f"--target: {float(bad)} must be an accuracy in (0, 1]" in capsys.readouterr().err


def test_time_to_accuracy_and_bad_inputs(tmp_path, capsys):
    assert time_to_accuracy([(0.0, 0.1), (5.0, 0.5)], 0.6) is None
    assert time_to_accuracy([(0.0, 0.1), (5.0, 0.5)], 0.5) == 5.0
    assert main(["compare", str(tmp_path)]) == 2
    assert (
        "not a finished run directory (no summary.json), nor a folder with finished runs at any depth"
        in capsys.readouterr().err
    )
    assert main(["run", str(tmp_path / "nope*.toml")]) == 2
    assert "no scenario matches" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["seed = 'x'"])
def test_a_bad_scenario_in_a_set_stops_before_any_run(tmp_path, capsys, bad):
    (tmp_path / "a.toml").write_text(TINY.format(name="a", seed=1))
    (tmp_path / "b.toml").write_text(bad)
    assert main(["run", str(tmp_path), "--backend", "local", "--out", str(tmp_path / "out")]) == 2
    assert "seed: expected an integer" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_fedasmu_paper_gain_formulas():
    """Spec §4.6: the formulas reproduce the paper's stated extremes from Table 4."""
    assert 100 * accuracy_gain(0.267, 0.168) == pytest.approx(58.93, abs=0.005)  # VGG/CIFAR-100 vs FedAsync
    assert 100 * speed_gain(12591, 83693) == pytest.approx(84.96, abs=0.005)  # AlexNet/CIFAR-10 vs FedAsync
    assert 100 * speed_gain(8800, 365642) == pytest.approx(97.59, abs=0.005)  # LeNet/CIFAR-10 vs PORT
    assert 100 * speed_gain(16940, 13960) == pytest.approx(-21.35, abs=0.005)  # FedSSMU slower than FedAvg
    assert accuracy_gain(0.5, None) is None and speed_gain(10.0, None) is None
    assert convergence_accuracy(
        [(float(i), a) for i, a in enumerate([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])]
    ) == (pytest.approx(0.5))


def _record(name, curve):
    return RunRecord(
        Path(name),
        name,
        name,
        "synthetic",
        curve[-1][1],
        max(a for _, a in curve),
        curve[-1][0],
        0,
        0,
        curve,
        {},
    )


def test_rows_are_named_by_as_few_trailing_folders_as_tell_them_apart():
    from raysfl.compare import distinct_names

    paths = [Path("out/s2/seed1_gas"), Path("out/a01/seed1_gas"), Path("out/a01/seed1_fedavg"), Path("x")]
    assert distinct_names(paths) == ["s2/seed1_gas", "a01/seed1_gas", "seed1_fedavg", "x"]
    assert distinct_names([Path("a/run"), Path("/b/a/run")]) == ["a/run", "b/a/run"]


def test_compare_table_gains_of_the_first_run():
    ours = _record("ours", [(0.0, 0.1), (10.0, 0.5), (20.0, 0.6)])
    base = _record("base", [(0.0, 0.1), (30.0, 0.5), (40.0, 0.4)])
    never = _record("never", [(0.0, 0.1), (50.0, 0.3)])
    rows = compare_table([ours, base, never], target=0.5).splitlines()[2:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    # columns: ..., s to 50 %, conv acc %, acc gain of 1st %, speed gain of 1st %, MiB up, MiB down
    assert cells[0][7:11] == ["10.0", "40.00", "-", "-"]
    # conv acc = mean of the last 5: ours 0.4, base 1/3; time 10 vs 30 s
    assert cells[1][7:11] == ["30.0", "33.33", "+20.00", "+66.67"]
    assert cells[2][7:11] == ["not reached", "20.00", "+100.00", "-"]


def test_damaged_runs_and_folders_without_runs_are_named(tmp_path, capsys):
    """A damaged file is named with what is wrong (no decoder traceback), and a folder among the arguments
    that holds no finished run is refused (it was dropped silently when another argument had runs)."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "a.toml").write_text(TINY.format(name="a", seed=1))
    out = tmp_path / "runs"
    assert (
        main(
            [
                "run",
                str(tmp_path / "a.toml"),
                "train.global_iterations=1",
                "--backend",
                "local",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    run = out
    for name, damage, problem in (
        ("summary.json", lambda p: p.write_text("{bad"), "damaged or not raysfl's (Expecting property name"),
        ("config.toml", lambda p: p.write_text("[[["), "damaged or not raysfl's (Invalid initial character"),
        ("metrics.parquet", lambda p: p.write_bytes(b""), "damaged or not raysfl's ("),
        (
            "metrics.parquet",
            lambda p: pq.write_table(pa.table({"t": [0.0]}), p),
            "damaged or not raysfl's (no column iteration, accuracy)",
        ),
        (
            "summary.json",
            lambda p: p.write_text("{}"),
            "damaged or not raysfl's (no scenario, algorithm, dataset",
        ),
        (
            "summary.json",
            lambda p: p.write_text(p.read_text().replace('"bytes_up": ', '"bytes_up": "zz", "was": ')),
            "damaged or not raysfl's (bytes_up is 'zz', not a number)",
        ),
        (
            "config.toml",
            lambda p: p.write_text('reference = "x"\n'),
            "damaged or not raysfl's ([reference] is not a table)",
        ),
        (  # nested thousands deep: the parser's RecursionError, once a traceback
            "config.toml",
            lambda p: p.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n"),
            "damaged or not raysfl's (maximum recursion depth exceeded",
        ),
        ("summary.json", lambda p: p.write_text("[" * 100_000), "damaged or not raysfl's (maximum recursion"),
    ):
        copy = tmp_path / f"damaged-{name}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(run, copy)
        damage(copy / name)
        assert main(["compare", str(run), str(copy)]) == 2
        err = capsys.readouterr().err
        assert f"raysfl: {copy / name}: {problem}" in err, err
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(run), str(tmp_path / "empty")]) == 2
    assert (
        f"{tmp_path / 'empty'}: not a finished run directory (no summary.json), nor a folder with finished"
        in capsys.readouterr().err
    )


def _summarise(run: Path, scenario: str, algorithm: str | None = None, **fields) -> Path:
    """``run`` (from ``make_run``) with the summary fields compare reads beyond ``make_run``'s."""
    summary = json.loads((run / "summary.json").read_text())
    summary.update(
        scenario=scenario, algorithm=algorithm or scenario, dataset="fashion-mnist", emulated_s=10.0
    )
    (run / "summary.json").write_text(json.dumps({**summary, **fields}))
    return run


def test_compare_lists_a_sweeps_trials_in_its_files_order(tmp_path, capsys):
    """The first row is the run the gain columns measure against: a sweep folder gives its trials in the
    sweep file's order (as `raysfl report` does), not by name, and names the trials that failed."""
    import json

    from tests.unit.sweep.test_report import _scenario, make_run

    root = tmp_path / "sweep"
    for name, acc in (("gas", 0.7), ("fedasync", 0.5)):
        curve = [(0, 0.0, 0.1), (1, 10.0, acc)]
        _summarise(make_run(root, f"seed1_{name}", _scenario(name, 1), curve), name)
    failed_midway = make_run(root, "seed1_fedsa", _scenario("fedsa", 1), [(0, 0.0, 0.1)])
    (failed_midway / "summary.json").unlink()  # it failed after writing its config and first evaluation
    trials = {
        "seed1_gas": {"status": "finished"},
        "seed1_fedasync": {"status": "finished"},
        "seed1_fedbuff": {"status": "failed", "error": "RunFailedError: gave up"},
        "seed1_fedsa": {"status": "failed", "error": "ValueError: diverged"},
    }
    (root / "sweep.json").write_text(json.dumps({"trials": trials}))
    assert main(["compare", str(root), "--target", "0.6"]) == 0
    captured = capsys.readouterr()
    rows = [line for line in captured.out.splitlines() if line.startswith("| seed1_")]
    assert [row.split(" | ")[0] for row in rows] == ["| seed1_gas", "| seed1_fedasync"]
    assert f"compare: left out {root / 'seed1_fedbuff'}: failed: RunFailedError: gave up" in captured.err
    assert f"compare: left out {root / 'seed1_fedsa'}: failed: ValueError: diverged" in captured.err


def test_escape_sequences_in_a_received_folder_reach_the_terminal_as_text(tmp_path, capsys):
    """A failed trial's recorded error and a run's algorithm name come from the folder, which may be someone
    else's: printed raw, ESC ] 0 ; ... BEL retitles the terminal and ESC [ 2 J clears it."""
    import json

    from tests.unit.sweep.test_report import _scenario, make_run

    hostile = "\x1b]0;PWNED\x07\x1b[2J"
    root = tmp_path / "sweep"
    run = make_run(root, "seed1_gas", _scenario("gas", 1), [(0, 0.0, 0.1), (1, 10.0, 0.7)])
    _summarise(run, "gas", f"gas{hostile}")
    trials = {"seed1_gas": {"status": "finished"}, "seed1_fedbuff": {"status": "failed", "error": hostile}}
    (root / "sweep.json").write_text(json.dumps({"trials": trials}))

    assert main(["compare", str(root)]) == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out + captured.err
    assert "gas\\x1b]0;PWNED\\x07\\x1b[2J" in captured.out
    assert "failed: \\x1b]0;PWNED\\x07\\x1b[2J" in captured.err

    assert main(["report", str(root), "--out", str(tmp_path / "report")]) == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err
    assert "skipped" in captured.err and "\\x1b]0;PWNED" in captured.err


def test_a_run_given_twice_is_compared_once_and_a_sweep_without_finished_runs_names_its_failures(
    tmp_path, capsys
):
    import json

    from tests.unit.sweep.test_report import _scenario, make_run

    root = tmp_path / "sweep"
    run = _summarise(make_run(root, "seed1_gas", _scenario("gas", 1), [(0, 0.0, 0.1), (1, 10.0, 0.7)]), "gas")
    assert main(["compare", str(run), str(root / ".." / "sweep" / "seed1_gas")]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n| seed1_gas") == 1
    assert "is given twice: compared once" in captured.err
    failed = tmp_path / "failed"
    failed.mkdir()
    trials = {"seed1_gas": {"status": "failed", "error": "DataNotFoundError: no readable copy"}}
    (failed / "sweep.json").write_text(json.dumps({"trials": trials}))
    assert main(["compare", str(failed)]) == 2
    err = capsys.readouterr().err
    assert f"compare: left out {failed / 'seed1_gas'}: failed: DataNotFoundError: no readable copy" in err
    assert "nor a folder with finished runs at any depth" in err


def test_compare_finds_runs_at_any_depth_as_report_does(tmp_path, capsys):
    """A folder of sweeps (one sweep per setting, say) is compared whole: compare once looked one level down
    only and refused it. Trials that failed in a nested sweep are named; an interrupted run is marked."""
    import json

    from tests.unit.sweep.test_report import _scenario, make_run

    root = tmp_path / "study"
    for setting, acc in (("s2", 0.7), ("alpha01", 0.6)):
        curve = [(0, 0.0, 0.1), (1, 10.0, acc)]
        _summarise(make_run(root / setting, "seed1_gas", _scenario("gas", 1), curve), setting, "gas")
        trials = {"seed1_gas": {"status": "finished"}, "seed1_fedbuff": {"status": "failed", "error": "E: x"}}
        (root / setting / "sweep.json").write_text(json.dumps({"trials": trials}))
    _summarise(
        make_run(root / "extra", "gas_stopped", _scenario("gas", 2), [(0, 0.0, 0.1)]), "gas", interrupted=True
    )

    assert main(["compare", str(root)]) == 0
    captured = capsys.readouterr()
    rows = [line.split(" | ")[0] for line in captured.out.splitlines()[2:]]
    # folders by name; the trial's name twice, told apart by its sweep's folder
    assert rows == ["| alpha01/seed1_gas", "| gas_stopped (interrupted)", "| s2/seed1_gas"]
    for setting in ("s2", "alpha01"):
        assert f"compare: left out {root / setting / 'seed1_fedbuff'}: failed: E: x" in captured.err

    assert main(["report", str(root), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    for setting in ("s2", "alpha01"):  # report, too, names a nested sweep's failed trials
        assert f"{root / setting / 'seed1_fedbuff'}" in err, err
