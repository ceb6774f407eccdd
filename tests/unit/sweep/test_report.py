"""`raysfl report`: grouping by everything but the seed, mean ± std and time to target by hand, figures."""

import doctest
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import raysfl.report.paired
import raysfl.report.runs
import raysfl.report.student_t
from raysfl.cli import main
from raysfl.config import dumps_toml
from raysfl.report.figures import accuracy_figure
from raysfl.report.markdown import group_stats, label_legend, method_labels
from raysfl.report.runs import find_runs, group_runs, mean_curve


def _scenario(algorithm: str, seed: int, partition: str = "shard", params: dict | None = None) -> dict:
    return {
        "name": f"{algorithm}-{seed}",
        "seed": seed,
        "data": {"dataset": "fashion-mnist", "partition": partition},
        "algorithm": {"name": algorithm, "params": params or {}},
        "engine": {"pools": seed},  # the pool count never splits a group
        "reference": {"accuracy": 90.66, "std": 0.2, "source": "GAS Table 1"} if algorithm == "gas" else {},
    }


def make_run(
    root: Path,
    name: str,
    scenario: dict,
    curve: list[tuple[int, float, float]],
    loss: list[float] | None = None,
    **summary,
) -> Path:
    """A finished run directory with evaluations (iteration, emulated s, accuracy, and ``loss`` if given),
    1 MiB up per iteration."""
    out = root / name
    out.mkdir(parents=True)
    doc = dict(scenario)
    doc["run"] = {"raysfl_version": "0.1.0", "commit": "abc123"}
    (out / "config.toml").write_text(dumps_toml(doc))
    rows = {
        "iteration": [it for it, _, _ in curve],
        "t": [t for _, t, _ in curve],
        "wall_s": [0.5 * it for it, _, _ in curve],
        "accuracy": [acc for _, _, acc in curve],
        "bytes_up": [it * 2**20 for it, _, _ in curve],
        "bytes_down": [it * 2**19 for it, _, _ in curve],
    }
    if loss is not None:
        rows["loss"] = loss
    pq.write_table(pa.table(rows), out / "metrics.parquet")
    accs = [acc for _, _, acc in curve]
    body = {
        "final_accuracy": accs[-1],
        "best_accuracy": max(accs),
        "bytes_up": rows["bytes_up"][-1],
        "bytes_down": rows["bytes_down"][-1],
        "wall_s": rows["wall_s"][-1],
        "interrupted": False,
    }
    body.update(summary)
    (out / "summary.json").write_text(json.dumps(body))
    return out


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "gas_s1", _scenario("gas", 1), [(0, 0.0, 0.1), (1, 10.0, 0.5), (2, 20.0, 0.7)])
    make_run(root, "gas_s2", _scenario("gas", 2), [(0, 0.0, 0.1), (1, 12.0, 0.65), (2, 24.0, 0.8)])
    make_run(root, "gas_s3", _scenario("gas", 3), [(0, 0.0, 0.1), (1, 8.0, 0.3), (2, 16.0, 0.45)])
    make_run(root, "fedavg_s1", _scenario("fedavg", 1), [(0, 0.0, 0.1), (1, 30.0, 0.4), (2, 60.0, 0.62)])
    make_run(root, "fedavg_s2", _scenario("fedavg", 2), [(0, 0.0, 0.1), (1, 40.0, 0.35), (2, 80.0, 0.5)])
    make_run(root, "gas_iid", _scenario("gas", 1, "iid"), [(0, 0.0, 0.1), (1, 10.0, 0.8), (2, 20.0, 0.9)])
    unfinished = make_run(root, "gas_s4", _scenario("gas", 4), [(0, 0.0, 0.1)])
    (unfinished / "summary.json").unlink()
    make_run(root, "gas_s5", _scenario("gas", 5), [(0, 0.0, 0.1)], interrupted=True)
    return root


def test_groups_by_everything_but_the_seed_and_skips_unfinished_runs(runs):
    found, skipped = find_runs([runs])
    groups = group_runs(found)
    assert [sorted(r.path.name for r in g.runs) for g in groups] == [
        ["fedavg_s1", "fedavg_s2"],
        ["gas_iid"],
        ["gas_s1", "gas_s2", "gas_s3"],
    ]
    assert sorted((p.name, why) for p, why in skipped) == [
        ("gas_s4", "unfinished (no summary.json)"),
        ("gas_s5", "interrupted"),
    ]


def test_mean_std_and_time_to_target_equal_a_hand_computation(runs):
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([runs])[0])}
    gas = group_stats(groups["gas_s1"], target=0.6)
    assert gas.n == 3
    assert gas.final[0] == pytest.approx((0.7 + 0.8 + 0.45) / 3)
    mean = (0.7 + 0.8 + 0.45) / 3
    assert gas.final[1] == pytest.approx(
        math.sqrt(((0.7 - mean) ** 2 + (0.8 - mean) ** 2 + (0.45 - mean) ** 2) / 2)
    )
    # seed 1 reaches 60 % at its 2nd evaluation (20 s), seed 2 at its 1st (12 s), seed 3 never
    assert gas.reached == 2 and gas.to_target[0] == pytest.approx(16.0)
    assert gas.to_target[1] == pytest.approx(math.sqrt(((20 - 16) ** 2 + (12 - 16) ** 2) / 1))
    assert gas.mib_up == pytest.approx(2.0) and gas.mib_down == pytest.approx(1.0)
    by_iteration = group_stats(groups["gas_s1"], target=0.6, x="iteration")
    assert by_iteration.to_target[0] == pytest.approx(1.5)  # iterations 2 and 1
    fedavg = group_stats(groups["fedavg_s1"], target=0.6)
    assert fedavg.reached == 1 and fedavg.to_target == (60.0, None)  # one seed: no std
    single = group_stats(groups["gas_iid"], target=None)
    assert single.final == (0.9, None) and single.reached == 0


def test_the_footnote_says_time_to_target_is_over_the_seeds_that_reached_it(runs, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--target", "0.6"]) == 0
    text = (out / "report.md").read_text()
    assert (
        "to 60 %: over the seeds that reached it, which the count in brackets gives; a seed that did not"
        in text
    )
    assert main(["report", str(runs), "--out", str(tmp_path / "plain")]) == 0
    assert "seeds that reached it" not in (tmp_path / "plain" / "report.md").read_text()


def test_last_k_column_is_the_seed_mean_of_each_runs_tail_mean(runs, tmp_path, capsys):
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([runs])[0])}
    gas = group_stats(groups["gas_s1"], target=None, last=2)
    # per run: (0.5 + 0.7) / 2 = 0.6, (0.65 + 0.8) / 2 = 0.725, (0.3 + 0.45) / 2 = 0.375
    tails = [0.6, 0.725, 0.375]
    mean = sum(tails) / 3
    assert gas.last[0] == pytest.approx(mean)
    assert gas.last[1] == pytest.approx(math.sqrt(sum((t - mean) ** 2 for t in tails) / 2))
    # K larger than a run's evaluations: all of them
    assert group_stats(groups["gas_iid"], target=None, last=10).last == (pytest.approx(0.6), None)
    assert group_stats(groups["gas_iid"], target=None).last == (None, None)  # off by default
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--last", "2"]) == 0
    text = (out / "report.md").read_text()
    assert "| final acc % | best acc % | last-2 acc % | paper acc % |" in text
    assert f"| data.partition=shard | gas | 3 | 65.00 ± 18.03 | 65.00 ± 18.03 | {100 * mean:.2f} ± " in text
    for bad in ("-1", "0"):  # 0 used to be taken silently as "no column"
        assert main(["report", str(runs), "--out", str(out), "--last", bad]) == 2
        assert f"--last: {bad} must be >= 1" in capsys.readouterr().err
    # more than some runs have: said, with how the column then reads them (each run here has 3)
    assert main(["report", str(runs), "--out", str(out), "--last", "5"]) == 0
    assert (
        "report: warning: --last 5: 6 run(s) have fewer evaluations (the fewest: 3); their last-5 mean is "
        "over all their evaluations, the initial model's included" in capsys.readouterr().err
    )


def test_mean_curve_interpolates_seeds_onto_one_grid():
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.1, 0.5, 0.7]))
    b = (np.array([0.0, 12.0, 24.0]), np.array([0.1, 0.65, 0.8]))
    grid, mean, low, high = mean_curve([a, b])
    assert list(grid) == [0.0, 10.0, 12.0, 20.0]  # stops where the shorter seed ends
    # at x = 10: a = 0.5, b = 0.1 + 0.55·10/12
    b10 = 0.1 + 0.55 * 10 / 12
    assert mean[1] == pytest.approx((0.5 + b10) / 2) and low[1] == pytest.approx(min(0.5, b10))
    assert high[3] == pytest.approx(max(0.7, 0.65 + 0.15 * 8 / 12))


def test_mean_curve_starts_where_every_seed_has_evaluated():
    """Wall-clock axes start at a different x per seed: no seed's first value is held before it (the mean
    began at 0.05 s with seed b's first accuracy standing in for values it never had)."""
    a = (np.array([0.05, 1.0, 2.0]), np.array([0.1, 0.5, 0.7]))
    b = (np.array([0.85, 1.5, 2.5]), np.array([0.3, 0.6, 0.8]))
    grid, mean, _, _ = mean_curve([a, b])
    assert list(grid) == [0.85, 1.0, 1.5, 2.0]
    a85 = 0.1 + 0.4 * 0.8 / 0.95
    assert mean[0] == pytest.approx((a85 + 0.3) / 2)
    assert len(mean_curve([(np.array([0.0, 0.5]), np.array([0.1, 0.2])), b])[0]) == 0  # no overlap


def test_the_figure_has_one_line_and_one_band_per_method(runs):
    groups = [g for g in group_runs(find_runs([runs])[0]) if g.scenario["data"]["partition"] == "shard"]
    names = method_labels(groups)
    fig = accuracy_figure(groups, [names[id(g)] for g in groups], "emulated", "shard")
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["fedavg (n=2)", "gas (n=3)"]
    assert len(ax.collections) == 2  # the min–max bands
    assert ax.get_xlabel() == "emulated time (s)" and ax.get_ylabel() == "test accuracy (%)"
    gas_x, gas_y = lines[1].get_data()
    assert list(gas_x) == [0.0, 8.0, 10.0, 12.0, 16.0]
    assert gas_y[0] == pytest.approx(10.0)  # percent
    band = ax.collections[1].get_paths()[0].vertices
    assert band[:, 1].max() == pytest.approx(100 * (0.65 + 0.15 * 4 / 12))  # seed 2 at 16 s, interpolated
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fedavg (n=2)", "gas (n=3)"]
    w, h = fig.get_size_inches() * fig.dpi
    assert 600 <= w <= 900 and 400 <= h <= 600


def test_method_labels_name_variants_of_one_method_only():
    from raysfl.report.runs import Group

    groups = [
        Group("a", {"algorithm": {"name": "gas", "params": {"generate": True, "q_s": 4}}}),
        Group("b", {"algorithm": {"name": "gas", "params": {"generate": False, "q_s": 4}}}),
        Group("c", {"algorithm": {"name": "fedavg", "params": {}}}),
    ]
    assert list(method_labels(groups).values()) == ["gas (generate=True)", "gas (generate=False)", "fedavg"]


def test_report_names_the_processors_and_torch_that_made_the_runs(tmp_path):
    """Processors can differ in a result's last bits: a report of runs from two machines says so."""
    import tomllib

    curve = [(0, 0.0, 0.1), (1, 10.0, 0.5)]
    xeon = "Intel(R) Xeon(R) CPU @ 2.20GHz"
    for seed, cpu in ((1, "AMD EPYC 7B13"), (2, xeon), (3, "AMD EPYC 7B13")):
        run = make_run(tmp_path / "runs", f"s{seed}", _scenario("gas", seed), curve)
        doc = tomllib.loads((run / "config.toml").read_text())
        doc["run"].update(driver_processor=cpu, torch_version="2.13.0")
        (run / "config.toml").write_text(dumps_toml(doc))
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert (
        "Runs made with raysfl 0.1.0 at commit abc123.\n"
        "Driver processor: AMD EPYC 7B13, torch 2.13.0; Intel(R) Xeon(R) CPU @ 2.20GHz, torch 2.13.0.\n\n"
    ) in text


def test_paired_tables_name_the_seeds_whose_runs_ran_on_different_processors(tmp_path):
    """A seed's difference of runs from two processors holds the machines' part too: the report says which."""
    import tomllib

    from raysfl.report.paired import computed_on, cross_processor_seeds

    epyc, xeon = "AMD EPYC 7B13", "Intel(R) Xeon(R) CPU @ 2.20GHz"
    made_on = {  # (method, seed): processor; fedavg seed 4 records none (made before it was recorded)
        ("gas", 1): epyc, ("gas", 2): xeon, ("gas", 3): epyc, ("gas", 4): xeon,
        ("fedavg", 1): epyc, ("fedavg", 2): epyc, ("fedavg", 3): xeon,
    }  # fmt: skip
    root = tmp_path / "runs"
    for algorithm in ("gas", "fedavg"):
        for seed in (1, 2, 3, 4):
            run = make_run(
                root, f"{algorithm}_{seed}", _scenario(algorithm, seed), [(0, 0.0, 0.1), (1, 1.0, 0.5)]
            )
            if (algorithm, seed) in made_on:
                doc = tomllib.loads((run / "config.toml").read_text())
                doc["run"]["driver_processor"] = made_on[algorithm, seed]
                (run / "config.toml").write_text(dumps_toml(doc))
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([root])[0])}
    gas, fedavg = groups["gas_1"], groups["fedavg_1"]
    assert cross_processor_seeds(gas, fedavg) == (2, 3)
    assert cross_processor_seeds(fedavg, gas) == (2, 3)
    assert cross_processor_seeds(gas, gas) == ()
    assert main(["report", str(root), "--out", str(tmp_path / "rep"), "--paired", "fedavg"]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert (
        "Seeds 2, 3 of `gas` − `fedavg` pair runs computed on different processors (summary.json's "
        "`placement`, else config.toml's `driver_processor`)"
    ) in text
    assert text.count("different processors") == 1  # once per pair of methods, after its tables
    for config in root.glob("*/config.toml"):  # one processor throughout: no note
        config.write_text(config.read_text().replace(xeon, epyc))
    assert main(["report", str(root), "--out", str(tmp_path / "rep2"), "--paired", "fedavg"]) == 0
    assert "different processors" not in (tmp_path / "rep2" / "report.md").read_text()
    # the actors' processors, where summary.json records them, count over the driver's: gas seed 1's pools
    # ran on a Xeon node of a cluster whose driver was an EPYC; a GPU server's host CPU does not count
    for name, pools, server in (("gas_1", [epyc, xeon], epyc), ("fedavg_1", [epyc, epyc], xeon)):
        summary = json.loads((root / name / "summary.json").read_text())
        device = "cuda" if name == "fedavg_1" else "cpu"
        summary["placement"] = {"device": device, "processor": server, "pool_processors": pools}
        (root / name / "summary.json").write_text(json.dumps(summary))
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([root])[0])}
    seed_1 = {name: next(r for r in groups[name].runs if r.seed == 1) for name in ("gas_1", "fedavg_1")}
    assert computed_on(seed_1["gas_1"]) == {epyc, xeon}
    assert computed_on(seed_1["fedavg_1"]) == {epyc}
    assert cross_processor_seeds(groups["gas_1"], groups["fedavg_1"]) == (1,)


def test_report_md_has_a_row_per_group_and_embeds_the_figures(runs, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--target", "0.6"]) == 0
    text = (out / "report.md").read_text()
    assert (
        "| data.partition=shard | gas | 3 | 65.00 ± 18.03 | 65.00 ± 18.03 | 90.66 ± 0.20 (GAS Table 1) "
        "| 16.0 ± 5.7 (2/3)" in text
    )
    assert "| data.partition=iid | gas | 1 | 90.00 | 90.00 |" in text
    assert "| data.partition=shard | fedavg | 2 | 56.00 ± 8.49 |" in text
    assert "raysfl 0.1.0 at commit abc123" in text
    assert "Data: fashion-mnist.\n" in text
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) == 6  # 2 settings × (emulated, iteration, bytes)
    for name in pngs:
        assert f"]({name})" in text
    assert "gas_s4`: unfinished" in text
    err = capsys.readouterr().err
    assert "skipped" in err and "gas_s5: interrupted" in err


def test_the_per_seed_table_has_each_runs_own_numbers(runs, tmp_path):
    """One cell per method and seed: the run's last-K mean (or final) accuracy and its x at the target."""
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--target", "0.6", "--last", "2"]) == 0
    text = (out / "report.md").read_text()
    # gas, shard: tails (0.5+0.7)/2, (0.65+0.8)/2, (0.3+0.45)/2; 0.6 first reached at 20 s, 12 s, never
    assert "Per seed (last-2 acc % / emulated s to 60 %):" in text
    assert "| method | seed 1 | seed 2 | seed 3 |" in text
    assert "| gas | 60.00 / 20.0 | 72.50 / 12.0 | 37.50 / — |" in text  # one decimal, as the main table
    assert "| fedavg | 51.00 / 60.0 | 42.50 / — |  |" in text  # no seed 3: an empty cell
    # without --last and --target: the final accuracy alone
    assert main(["report", str(runs), "--out", str(out)]) == 0
    assert "| gas | 70.00 | 80.00 | 45.00 |" in (out / "report.md").read_text()


def test_report_errors_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "no finished runs" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["report", str(empty), "--target", "60"]) == 2
    assert "--target: 60.0 must be an accuracy in (0, 1]" in capsys.readouterr().err


def test_keys_fixed_per_method_are_part_of_the_method_not_a_setting():
    """A [link] axis giving each method its own budget keeps all methods in one setting and one figure."""
    from raysfl.report.markdown import split_varying_keys
    from raysfl.report.runs import Group

    def group(key, name, iterations, partition):
        return Group(
            key,
            {
                "algorithm": {"name": name, "params": {}},
                "train": {"global_iterations": iterations},
                "data": {"partition": partition},
            },
        )

    groups = [
        group("a", "fedavg", 20, "iid"),
        group("b", "fedasync", 200, "iid"),
        group("c", "fedavg", 20, "shard"),
        group("d", "fedasync", 200, "shard"),
    ]
    keys = ["data.partition", "train.global_iterations"]
    assert split_varying_keys(groups, keys) == (["data.partition"], ["train.global_iterations"])
    names = method_labels(groups, ["train.global_iterations"])
    assert [names[id(g)] for g in groups] == [
        "fedavg (train.global_iterations=20)",
        "fedasync (train.global_iterations=200)",
        "fedavg (train.global_iterations=20)",
        "fedasync (train.global_iterations=200)",
    ]
    # One method run with two budgets: the budget is a setting again.
    groups.append(group("e", "fedavg", 40, "iid"))
    assert split_varying_keys(groups, keys) == (keys, [])
    # A single method: everything that varies is a setting.
    assert split_varying_keys(groups[::2], keys) == (keys, [])


def test_a_sweeps_link_labels_name_its_methods(tmp_path):
    """sweep.json's labels (a [link] axis's `label` list) name the rows instead of name + options."""
    root = tmp_path / "sweep"
    trials = {}
    points = [("fsl_mc", "splitfed_v1", 1), ("fsl_mc", "splitfed_v1", 2), ("oc", "gas", 1)]
    for label, algorithm, seed in points:
        name = f"seed{seed}_{label}"
        make_run(root, name, _scenario(algorithm, seed), [(0, 0.0, 0.1), (1, 10.0, 0.5)])
        trials[name] = {"status": "finished", "labels": {"method": label}}
    make_run(root, "loose_gas", _scenario("gas", 3, params={"q_s": 2}), [(0, 0.0, 0.1), (1, 10.0, 0.4)])
    (root / "sweep.json").write_text(json.dumps({"trials": trials}))
    runs, _ = find_runs([root])
    groups = group_runs(runs)
    names = method_labels(groups)
    assert sorted(names.values()) == ["fsl_mc", "gas", "oc"]
    algorithms = {names[id(g)]: str(g.method["name"]) for g in groups}
    legend = "Method labels of the sweeps and the algorithm each runs: `fsl_mc` splitfed_v1, `oc` gas."
    assert label_legend(algorithms) == legend
    assert f"\n{legend}\n" in _report_md(root, tmp_path / "rep")


def test_no_label_legend_when_every_label_starts_with_its_algorithm():
    """Plain names and a method's variants (``gas (generate=False)``) name their algorithm already."""
    variants = {"gas (generate=False)": "gas", "gas (generate=True)": "gas", "fedavg": "fedavg"}
    assert label_legend(variants) == ""
    assert label_legend({"fedavg_e5": "fedavg", "fedasync": "fedasync"}) == ""
    # A longer word that only begins like the name does not name it.
    assert label_legend({"fedavgm": "fedavg", "per_job": "fedavg"}) == (
        "Method labels of the sweeps and the algorithm each runs: `fedavgm` fedavg, `per_job` fedavg."
    )


def _report_md(root: Path, out: Path) -> str:
    """``raysfl report ROOT --out OUT`` (which must succeed) and the report.md it wrote."""
    assert main(["report", str(root), "--out", str(out)]) == 0
    return (out / "report.md").read_text()


def _tiny_base(folder: Path) -> None:
    """``tiny.toml``: a sweep base of 5 clients on synthetic data."""
    (folder / "tiny.toml").write_text(
        'name = "t"\n[data]\ndataset = "synthetic"\n[model]\nname = "lenet5"\n'
        "[federation]\nnum_clients = 5\nactive_clients = 2\n"
    )


def test_sweep_trials_record_their_link_labels(tmp_path):
    from raysfl.sweep.spec import load_sweep

    _tiny_base(tmp_path)
    (tmp_path / "s.toml").write_text(
        'base = "tiny.toml"\n[grid]\nseed = [1, 2]\n[link.method]\nlabel = ["mc", "avg"]\n'
        '"algorithm.name" = ["splitfed_v1", "fedavg"]\n'
    )
    sweep = load_sweep(tmp_path / "s.toml")
    assert [(t.name, dict(t.labels)) for t in sweep.trials] == [
        ("seed1_mc", {"method": "mc"}),
        ("seed1_avg", {"method": "avg"}),
        ("seed2_mc", {"method": "mc"}),
        ("seed2_avg", {"method": "avg"}),
    ]


def test_paired_differences_equal_a_hand_computation(runs):
    from raysfl.report.paired import paired_difference

    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([runs])[0])}
    gas, fedavg = groups["gas_s1"], groups["fedavg_s1"]
    # fedavg ran seeds 1 and 2 only: gas − fedavg finals 0.70 − 0.62 and 0.80 − 0.50, in points
    diff = paired_difference(gas, fedavg)
    assert diff.seeds == (1, 2)
    assert diff.differences == (pytest.approx(8.0), pytest.approx(30.0))
    assert diff.mean == pytest.approx(19.0)
    assert diff.std == pytest.approx(math.sqrt((11.0**2 + 11.0**2) / 1))
    assert diff.standard_error == pytest.approx(diff.std / math.sqrt(2))
    assert (diff.ahead, diff.behind) == (2, 0)
    # 95 %: Student's t with 1 degree of freedom, t(0.975) = 12.7062 (tables), not 2 standard errors
    low, high = diff.interval()
    assert (low, high) == (
        pytest.approx(19.0 - 12.7062 * 11.0, abs=1e-3),
        pytest.approx(19.0 + 12.7062 * 11.0, abs=1e-3),
    )
    # last 2 evaluations: gas (0.5+0.7)/2, (0.65+0.8)/2 against fedavg (0.4+0.62)/2, (0.35+0.5)/2
    tail = paired_difference(fedavg, gas, last=2)
    assert tail.differences == (pytest.approx(51.0 - 60.0), pytest.approx(42.5 - 72.5))
    assert (tail.ahead, tail.behind) == (0, 2)
    # one common seed: a mean, no spread
    one = paired_difference(groups["gas_iid"], fedavg)
    assert one.seeds == (1,) and one.mean == pytest.approx(90.0 - 62.0) and one.standard_error is None
    assert one.interval() is None


def test_report_pairs_every_method_with_the_named_baseline_per_setting(runs, tmp_path):
    out = tmp_path / "rep"
    argv = ["report", str(runs), "--out", str(out), "--last", "2", "--paired", "fedavg"]
    assert main(argv) == 0
    text = (out / "report.md").read_text()
    assert "Paired with `fedavg`, final accuracy (points, method − fedavg, on the seeds both ran):" in text
    assert "| gas | +8.00 | +30.00 | +19.00 ± 15.56 (11.00) | [-120.77, +158.77] | 2 / 0 |" in text
    assert "Paired with `fedavg`, last-2 mean accuracy" in text
    assert "| gas | +9.00 | +30.00 | +19.50 ± 14.85 (10.50) | [-113.92, +152.92] | 2 / 0 |" in text
    # the iid setting has no fedavg runs, so nothing is paired across settings
    iid = text.split("## data.partition=iid", 1)[1]
    assert "No `fedavg` runs in this setting: nothing to pair with." in iid


def test_paired_names_resolve_to_one_label_or_fail_naming_the_flag(runs, tmp_path, capsys):
    from raysfl.report.paired import resolve_method

    labels = ["fsl_mc (model.aux=)", "cse_fsl (h=5)", "cse_fsl (h=25)"]
    assert resolve_method("fsl_mc", labels) == "fsl_mc (model.aux=)"
    assert resolve_method("cse_fsl (h=5)", labels) == "cse_fsl (h=5)"
    with pytest.raises(
        ValueError, match=r"--paired: 'cse_fsl' names several methods; choose one of 'cse_fsl \(h=5\)'"
    ):
        resolve_method("cse_fsl", labels)
    assert main(["report", str(runs), "--out", str(tmp_path / "rep"), "--paired", "fedbuff"]) == 2
    assert "--paired: 'fedbuff' is not a method of these runs; choose one of 'fedavg', 'gas'" in (
        capsys.readouterr().err
    )


def _variants(root: Path) -> None:
    """Four FedASMU variants over two seeds; the final accuracies are the variant's base + seed / 100."""
    finals = {"fedasmu": 0.30, "fedasmu_da": 0.40, "fedasmu_fa": 0.31, "fedasmu_0": 0.42}
    for name, final in finals.items():
        learn, slot = name in ("fedasmu", "fedasmu_fa"), name in ("fedasmu", "fedasmu_da")
        for seed in (1, 2):
            scen = _scenario("fedasmu", seed, params={"learn": learn, "slot": slot})
            make_run(root, f"{name}_{seed}", scen, [(0, 0.0, 0.1), (1, 1.0, final + seed / 100)])


def test_paired_a_vs_b_lists_only_the_named_comparisons(tmp_path):
    from raysfl.report.paired import Pairing, parse_pairings

    root = tmp_path / "runs"
    _variants(root)
    da, full = "fedasmu (learn=False, slot=True)", "fedasmu (learn=True, slot=True)"
    fa, zero = "fedasmu (learn=True, slot=False)", "fedasmu (learn=False, slot=False)"
    out = tmp_path / "rep"
    argv = ["report", str(root), "--out", str(out), "--paired", f"{full} vs {da}"]
    argv += ["--paired", f"{fa} vs {zero}", "--paired", f"{da} vs {zero}"]
    assert main(argv) == 0
    text = (out / "report.md").read_text()
    tables = text.split("Paired with ")[1:]
    assert [t.split("`")[1] for t in tables] == [da, zero]
    # learned controls: 0.31 − 0.41 and 0.32 − 0.42 against fixed ones, in both seeds
    assert f"| {full} | -10.00 | -10.00 | -10.00 ± 0.00 (0.00) | [-10.00, -10.00] | 0 / 2 |" in tables[0]
    assert tables[0].count("| fedasmu (") == 1
    assert [line.split(" |")[0] for line in tables[1].splitlines() if line.startswith("| fedasmu")] == [
        f"| {fa}",
        f"| {da}",
    ]  # in the order given, not the report's
    assert f"| {da} | -2.00 | -2.00 | -2.00 ± 0.00 (0.00) | [-2.00, -2.00] | 0 / 2 |" in tables[1]
    # a baseline given alone as well keeps every method
    labels = [da, full, fa, zero]
    assert parse_pairings([f"{full} vs {da}", da], labels) == [Pairing(da, None)]
    assert parse_pairings([da, f"{full} vs {da}"], labels) == [Pairing(da, None)]
    assert parse_pairings([f"{full} vs {da}", f"{full} vs {da}"], labels) == [Pairing(da, (full,))]


def test_the_recorded_command_reruns_as_it_stands(tmp_path, monkeypatch):
    import shlex

    root = tmp_path / "runs"
    _variants(root)
    pair = "fedasmu (learn=True, slot=True) vs fedasmu (learn=False, slot=True)"
    argv = ["report", str(root), "--out", str(tmp_path / "rep"), "--paired", pair]
    monkeypatch.setattr("sys.argv", ["raysfl", *argv])
    assert main(argv) == 0
    made = (tmp_path / "rep" / "report.md").read_text().split("Made by `", 1)[1].split("`.", 1)[0]
    assert shlex.split(made) == ["raysfl", *argv]  # the pairing stays one argument


def test_paired_a_vs_b_errors_name_the_flag_and_the_part(tmp_path, capsys):
    from raysfl.report.paired import parse_pairings

    labels = ["gas", "fedavg", "cse_fsl (h=5)", "cse_fsl (h=25)"]
    with pytest.raises(ValueError, match=r"--paired: 'gas vs gas' pairs 'gas' with itself"):
        parse_pairings(["gas vs gas"], labels)
    with pytest.raises(ValueError, match=r"--paired: 'cse_fsl' names several methods"):
        parse_pairings(["cse_fsl vs gas"], labels)
    root = tmp_path / "runs"
    _variants(root)
    assert main(["report", str(root), "--out", str(tmp_path / "rep"), "--paired", "fedasmu vs fedbuff"]) == 2
    err = capsys.readouterr().err
    assert "--paired: 'fedasmu' names several methods; choose one of 'fedasmu (learn=False" in err


def test_a_pair_missing_from_a_setting_says_so(runs):
    from raysfl.report.paired import paired_table

    groups = [g for g in group_runs(find_runs([runs])[0]) if g.setting["data"]["partition"] == "shard"]
    names = [g.method["name"] for g in groups]
    assert paired_table(groups, names, "fedavg", methods=["fedbuff"]) == [
        "No `fedbuff` runs in this setting to pair with `fedavg`."
    ]
    lines = paired_table(groups, names, "fedavg", methods=["gas"])
    assert "| gas | +8.00 | +30.00 | +19.00 ± 15.56 (11.00) | [-120.77, +158.77] | 2 / 0 |" in lines


def test_a_repeated_seed_is_counted_once_and_listed_as_skipped(runs, tmp_path, capsys):
    import shutil

    again = tmp_path / "again"
    shutil.copytree(runs / "fedavg_s1", again / "fedavg_s1")  # a second run of fedavg's seed 1
    out = tmp_path / "rep"
    assert main(["report", str(runs), str(again), str(runs / "gas_s1"), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    # fedavg: seeds 1 and 2 only (finals 0.62, 0.50), not three samples 0.62, 0.50, 0.62
    assert "| data.partition=shard | fedavg | 2 | 56.00 ± 8.49 |" in text
    assert "| data.partition=shard | gas | 3 |" in text
    repeat = f"the same setting and seed 1 as {runs / 'fedavg_s1'}: counted once"
    assert f"- `{again / 'fedavg_s1'}`: {repeat}" in text
    assert f"- `{runs / 'gas_s1'}`: found twice under the given paths: counted once" in text
    assert "counted once" in capsys.readouterr().err


def test_a_baseline_that_pairs_with_nothing_is_warned_about(tmp_path, capsys):
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (1, 1.0, 0.5)]
    make_run(root, "gas_iid", _scenario("gas", 1, "iid"), curve)
    make_run(root, "gas_shard", _scenario("gas", 1, "shard"), curve)
    make_run(root, "fedavg_dir", _scenario("fedavg", 1, "dirichlet"), curve)  # a setting of its own
    argv = ["report", str(root), "--out", str(tmp_path / "rep"), "--paired", "fedavg", "--paired", "gas"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (
        "report: warning: --paired 'fedavg': no setting has it and a method to pair with it (the settings "
        "split by data.partition); nothing was paired" in err
    )
    assert "'gas'" in err and err.count("report: warning:") == 2


def test_a_tie_counts_neither_ahead_nor_behind(tmp_path):
    from raysfl.report.paired import paired_table

    root = tmp_path / "runs"
    for seed, (a, b) in enumerate([(0.5, 0.5), (0.6, 0.4)], start=1):
        make_run(root, f"gas_{seed}", _scenario("gas", seed), [(0, 0.0, 0.1), (1, 1.0, a)])
        make_run(root, f"fedavg_{seed}", _scenario("fedavg", seed), [(0, 0.0, 0.1), (1, 1.0, b)])
    groups = group_runs(find_runs([root])[0])
    lines = paired_table(groups, [g.method["name"] for g in groups], "fedavg")
    assert "| gas | 0.00 | +20.00 | +10.00 ± 14.14 (10.00) | [-117.06, +137.06] | 1 / 0 |" in lines


@pytest.mark.parametrize("module", [raysfl.report.runs, raysfl.report.paired, raysfl.report.student_t])
def test_docstring_examples_hold(module):
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def _add_column(run_dir: Path, name: str, values: list) -> None:
    """Add an evaluation column to a run's metrics.parquet (one value per evaluation row)."""
    table = pq.read_table(run_dir / "metrics.parquet")
    pq.write_table(
        table.append_column(name, pa.array(values, type=pa.float64())), run_dir / "metrics.parquet"
    )


def test_metric_reports_another_accuracy_column_and_skips_runs_without_it(runs, tmp_path, capsys):
    # gas (shard) runs log an auxiliary-head accuracy; fedavg's do not (the column is absent or all null)
    _add_column(runs / "gas_s1", "aux_accuracy", [0.2, 0.6, 0.55])
    _add_column(runs / "gas_s2", "aux_accuracy", [0.2, 0.7, 0.75])
    _add_column(runs / "gas_s3", "aux_accuracy", [None, 0.4, 0.5])
    _add_column(runs / "fedavg_s1", "aux_accuracy", [None, None, None])
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([runs])[0])}
    gas = groups["gas_s1"]
    assert gas.runs[0].final("aux_accuracy") == 0.55 and gas.runs[0].best("aux_accuracy") == 0.6
    assert groups["fedavg_s1"].runs[0].final("aux_accuracy") is None
    st = group_stats(gas, target=0.6, metric="aux_accuracy", last=2)
    assert st.final[0] == pytest.approx((0.55 + 0.75 + 0.5) / 3)
    assert st.best[0] == pytest.approx((0.6 + 0.75 + 0.5) / 3)
    assert st.last[0] == pytest.approx(((0.6 + 0.55) / 2 + (0.7 + 0.75) / 2 + (0.4 + 0.5) / 2) / 3)
    assert st.reached == 2 and st.to_target[0] == pytest.approx(
        (10.0 + 12.0) / 2
    )  # seed 3 never reaches 60 %

    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--metric", "aux_accuracy", "--target", "0.6"]) == 0
    text = (out / "report.md").read_text()
    assert (
        "| setting | method | n | final aux_accuracy % | best aux_accuracy % | emulated s to 60 % (reached) |"
        in text
    )
    assert (
        "| all runs | gas | 3 | 60.00 ± 13.23 | 61.67 ± 12.58 | 11.0 ± 1.4 (2/3) |" in text
    )  # one setting left
    assert "paper acc" not in text and "fedavg |" not in text
    assert "Per seed (final aux_accuracy % / emulated s to 60 %):" in text
    assert "fedavg_s1`: no aux_accuracy in its evaluations" in text
    assert "fedavg_s1: no aux_accuracy in its evaluations" in capsys.readouterr().err
    # the figures are named after the metric they show
    assert sorted(p.name for p in out.glob("*.png")) == [
        f"aux_accuracy_{x}_1.png" for x in ("bytes", "emulated", "iteration")
    ]
    assert "![aux_accuracy against emulated time (s)](aux_accuracy_emulated_1.png)" in text


def test_metric_must_be_an_accuracy_column_of_the_runs(runs, tmp_path, capsys):
    assert main(["report", str(runs), "--out", str(tmp_path / "rep"), "--metric", "loss"]) == 2
    assert "--metric: 'loss' is not an accuracy column of these runs; choose one of 'accuracy'" in (
        capsys.readouterr().err
    )


def test_a_damaged_run_is_skipped_naming_its_file(runs):
    (runs / "gas_s2" / "summary.json").write_text("{bad")
    (runs / "fedavg_s1" / "metrics.parquet").write_bytes(b"PAR1 not really")
    (runs / "fedavg_s2" / "config.toml").write_text("[[[")
    found, skipped = find_runs([runs])
    assert sorted(r.path.name for r in found) == ["gas_iid", "gas_s1", "gas_s3"]
    why = {p.name: reason for p, reason in skipped}
    assert why["gas_s2"].startswith(f"{runs / 'gas_s2' / 'summary.json'}: damaged or not raysfl's (Expecting")
    assert why["fedavg_s1"].startswith(f"{runs / 'fedavg_s1' / 'metrics.parquet'}: damaged or not raysfl's (")
    assert why["fedavg_s2"].startswith(
        f"{runs / 'fedavg_s2' / 'config.toml'}: damaged or not raysfl's (Invalid"
    )


def test_engine_options_that_change_numbers_split_groups_and_the_others_do_not(tmp_path):
    """precision, memory_format, threads, server device and clock change a run's numbers; pools,
    placement, checkpoints and where the data are read from (or whether they may be downloaded) do not."""
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (1, 10.0, 0.5)]
    for seed, engine, data_dir in [
        (1, {"pools": 1, "precision": "float32"}, ""),
        (2, {"pools": 3, "checkpoint_every": 5, "precision": "float32"}, "/elsewhere"),
        (1, {"pools": 1, "precision": "bfloat16"}, ""),
        (1, {"pools": 1, "precision": "float32", "torch_threads": 2}, ""),
    ]:
        scenario = _scenario("fedavg", seed)
        scenario["engine"] = engine
        scenario["data"] = {**scenario["data"], "data_dir": data_dir, "download": not data_dir}
        name = f"{engine['precision']}_{engine.get('torch_threads', 1)}_{seed}"
        make_run(root, name, scenario, curve)
    found, _ = find_runs([root])
    groups = sorted(group_runs(found), key=lambda g: len(g.runs))
    assert [len(g.runs) for g in groups] == [1, 1, 2]
    assert sorted(r.seed for r in groups[-1].runs) == [1, 2]
    engines = [g.scenario["engine"] for g in groups[:2]]
    assert {(e["precision"], e.get("torch_threads")) for e in engines} == {("bfloat16", None), ("float32", 2)}
    assert raysfl.report.runs.differing_fields([g.scenario for g in groups]) == [
        "engine.precision",
        "engine.torch_threads",
    ]


def test_a_failed_trial_finished_since_counts_and_one_still_failed_gives_its_error(tmp_path):
    root = tmp_path / "sweep"
    curve = [(0, 0.0, 0.1), (1, 10.0, 0.5)]
    make_run(root, "resumed", _scenario("gas", 1), curve)  # `raysfl run --resume` finished it after
    still = make_run(root, "still", _scenario("gas", 2), curve)
    (still / "summary.json").unlink()
    failed = {"status": "failed", "error": "RunFailedError: gave up"}
    (root / "sweep.json").write_text(json.dumps({"trials": {"resumed": failed, "still": failed}}))
    found, skipped = find_runs([root])
    assert [r.path.name for r in found] == ["resumed"]
    assert [(p.name, why) for p, why in skipped] == [("still", "failed: RunFailedError: gave up")]


def test_a_sweeps_runs_come_in_its_files_order_not_by_folder_name(tmp_path):
    root = tmp_path / "sweep"
    planned = ["zeta_10", "zeta_5", "alpha_10", "alpha_5"]  # the order the sweep file plans them in
    for seed, name in enumerate(planned, start=1):
        make_run(root, name, _scenario("gas", seed), [(0, 0.0, 0.1), (1, 10.0, 0.5)])
    make_run(root, "extra", _scenario("gas", 9), [(0, 0.0, 0.1), (1, 10.0, 0.5)])  # not of the sweep
    (root / "sweep.json").write_text(json.dumps({"trials": {n: {"status": "finished"} for n in planned}}))
    found, _ = find_runs([root])
    assert [r.path.name for r in found] == [*planned, "extra"]


def test_tail_means_of_the_same_values_tie_exactly_whatever_their_order(tmp_path):
    from raysfl.report.paired import paired_table
    from raysfl.report.runs import tail_mean

    assert sum([0.1, 0.2, 0.3]) != sum([0.3, 0.2, 0.1])  # plain sums differ in the last bit
    assert tail_mean([0.1, 0.2, 0.3], 3) == tail_mean([0.3, 0.2, 0.1], 3)
    root = tmp_path / "runs"
    up, down = [0.1, 0.2, 0.3], [0.3, 0.2, 0.1]
    make_run(root, "gas_1", _scenario("gas", 1), [(i, float(i), a) for i, a in enumerate(up)])
    make_run(root, "fedavg_1", _scenario("fedavg", 1), [(i, float(i), a) for i, a in enumerate(down)])
    groups = group_runs(find_runs([root])[0])
    lines = paired_table(groups, [g.method["name"] for g in groups], "fedavg", last=3)
    assert "| gas | 0.00 | 0.00 | - | 0 / 0 |" in lines  # last-3 means tie: neither ahead nor behind


def test_a_report_on_synthetic_data_says_so(tmp_path):
    root = tmp_path / "runs"
    scenario = _scenario("fedavg", 1)
    scenario["data"] = {"dataset": "synthetic", "partition": "shard"}
    make_run(root, "s1", scenario, [(0, 0.0, 0.1), (1, 10.0, 0.5)], synthetic_data=True)
    assert main(["report", str(root), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    note = "synthetic data test the machinery; they are no result on any real dataset"
    assert f"Data: synthetic ({note})." in text


def test_a_new_report_removes_the_figures_of_an_earlier_one_that_it_does_not_use(runs, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--x", "wall"]) == 0
    assert sorted(out.glob("accuracy_wall_*.png"))
    (out / "notes.png").write_bytes(b"mine")  # not a report figure: kept
    assert main(["report", str(runs), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert not [p for p in pngs if p.startswith("accuracy_wall_")]
    assert [p for p in pngs if p != "notes.png"] == sorted(p for p in pngs if f"]({p})" in text)
    assert "notes.png" in pngs


def _gaps(tmp_path: Path) -> Path:
    """Three FedAvg seeds, one of them without an evaluation; three FedAsync seeds of 2 evaluations."""
    root = tmp_path / "gaps"
    make_run(root, "fedavg_s1", _scenario("fedavg", 1), [(0, 0.0, 0.1), (1, 10.0, 0.2), (2, 20.0, 0.4)])
    make_run(root, "fedavg_s2", _scenario("fedavg", 2), [(0, 0.0, 0.1), (1, 10.0, 0.3), (2, 20.0, 0.6)])
    empty = make_run(root, "fedavg_s3", _scenario("fedavg", 3), [(0, 0.0, 0.1)])
    pq.write_table(pq.read_table(empty / "metrics.parquet").slice(0, 0), empty / "metrics.parquet")
    (empty / "summary.json").write_text(json.dumps({"final_accuracy": None, "best_accuracy": None,
                                                    "interrupted": False}))  # fmt: skip
    for seed in (1, 2, 3):
        make_run(root, f"fedasync_s{seed}", _scenario("fedasync", seed), [(0, 0.0, 0.1), (1, 5.0, 0.255)])
    return root


def test_a_mean_over_fewer_seeds_than_the_group_says_over_how_many(tmp_path):
    """n counts the group's runs; a cell whose mean leaves a run out (no evaluation) says k/n, the figure's
    legend counts the curves it draws, and the footnote says what both mean."""
    out = tmp_path / "rep"
    assert main(["report", str(_gaps(tmp_path)), "--out", str(out), "--target", "0.255"]) == 0
    text = (out / "report.md").read_text()
    # final (0.4 + 0.6) / 2 over 2 of 3 seeds, sample std sqrt(0.02) = 14.14 points
    assert "| fedavg | 3 | 50.00 ± 14.14 (2/3) | 50.00 ± 14.14 (2/3) |" in text
    assert "| fedasync | 3 | 25.50 ± 0.00 | 25.50 ± 0.00 |" in text  # all three: no count
    assert "An accuracy cell with (k/n) is over the k seeds that evaluated it" in text
    groups = group_runs(find_runs([tmp_path / "gaps"])[0])
    names = method_labels(groups)
    fig = accuracy_figure(groups, [names[id(g)] for g in groups], "emulated", "gaps")
    labels = sorted(line.get_label() for line in fig.axes[0].get_lines())
    assert labels == ["fedasync (n=3)", "fedavg (n=2 of 3)"]


def test_the_target_is_named_as_the_threshold_applied(tmp_path):
    """--target 0.255 is reached by an evaluation at exactly 25.5 %: the heading says 25.5 %, not 26 %."""
    out = tmp_path / "rep"
    assert main(["report", str(_gaps(tmp_path)), "--out", str(out), "--target", "0.255"]) == 0
    text = (out / "report.md").read_text()
    assert "emulated s to 25.5 % (reached)" in text and "26 %" not in text
    assert "| fedasync | 3 | 25.50 ± 0.00 | 25.50 ± 0.00 | - | 5.0 ± 0.0 (3/3) |" in text
    assert "Per seed (final acc % / emulated s to 25.5 %):" in text


def test_a_last_k_longer_than_a_run_is_noted_in_the_report(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", str(_gaps(tmp_path)), "--out", str(out), "--last", "3"]) == 0
    note = (
        "--last 3: 3 run(s) have fewer evaluations (the fewest: 2); their last-3 mean is over all their "
        "evaluations, the initial model's included"
    )
    assert f"Note: {note}." in (out / "report.md").read_text()
    assert note in capsys.readouterr().err


def test_a_run_whose_test_loss_became_nan_is_named_in_the_report(tmp_path, capsys):
    """A diverged run evaluates at 10 % from then on; the tables keep it, and the report names it with the
    iteration of its first non-finite loss: NaN or +inf, not a high but finite loss."""
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (5, 10.0, 0.4), (10, 20.0, 0.1), (15, 30.0, 0.1)]
    make_run(root, "fedbuff_s1", _scenario("fedbuff", 1), curve, loss=[2.3, 2.65, math.nan, math.nan])
    make_run(root, "fedbuff_s2", _scenario("fedbuff", 2), curve, loss=[2.3, 1.9, 8.0, 9.5])  # high, finite
    make_run(root, "fedbuff_s3", _scenario("fedbuff", 3), curve, loss=[2.3, 1.9, 1.7, math.inf])
    out = tmp_path / "rep"
    assert main(["report", str(root), "--out", str(out)]) == 0
    note = (
        "2 run(s) diverged, their test loss NaN or infinite from the iteration given on: fedbuff_s1 (seed 1, "
        "iteration 10), fedbuff_s3 (seed 3, iteration 15); their accuracies count in the tables as evaluated"
    )
    text = (out / "report.md").read_text()
    assert f"Note: {note}." in text
    assert "| all runs | fedbuff | 3 | 10.00 ± 0.00 |" in text  # still in the means
    assert note in capsys.readouterr().err
    assert main(["report", str(root / "fedbuff_s2"), "--out", str(tmp_path / "one")]) == 0
    assert "diverged" not in (tmp_path / "one" / "report.md").read_text()


def test_long_method_labels_get_a_legend_under_the_axes(runs):
    """A sweep's bound keys make labels of 100 characters: inside the axes they covered the curves."""
    groups = [g for g in group_runs(find_runs([runs])[0]) if g.scenario["data"]["partition"] == "shard"]
    long = ["fedavg (" + ", ".join(f"train.key_{i}=value_{i}" for i in range(6)) + ")", "gas"]
    fig = accuracy_figure(groups, long, "emulated", "shard")
    (ax,) = fig.axes
    assert ax.get_legend() is None and len(fig.legends) == 1
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "\n" in texts[0] and texts[0].replace("\n", " ") == long[0] + " (n=2)"  # wrapped, not cut
    assert fig.get_size_inches()[1] > 4.5  # taller, so the axes keep their height
    fig.canvas.draw()  # constrained layout: the axes keep most of the width
    assert ax.get_position().width > 0.6


def test_a_repeated_seed_with_other_numbers_says_so(runs, tmp_path):
    """The first run of a seed is kept; a second one with other evaluations is named as different."""
    other = tmp_path / "other"
    make_run(other, "gas_s1", _scenario("gas", 1), [(0, 0.0, 0.1), (1, 10.0, 0.5), (2, 20.0, 0.3)])
    same = tmp_path / "same"
    make_run(same, "gas_s1", _scenario("gas", 1), [(0, 0.0, 0.1), (1, 10.0, 0.5), (2, 20.0, 0.7)])
    out = tmp_path / "rep"
    assert main(["report", str(runs), str(other), str(same), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert f"- `{other / 'gas_s1'}`: the same setting and seed 1 as {runs / 'gas_s1'}: counted once (its " \
        "numbers differ: final accuracy 30.00 % against 70.00 %)" in text  # fmt: skip
    assert f"- `{same / 'gas_s1'}`: the same setting and seed 1 as {runs / 'gas_s1'}: counted once\n" in text
    # two copies of a diverged run (NaN != NaN) are the same numbers
    for folder in ("nan_a", "nan_b"):
        make_run(tmp_path / folder, "gas_s7", _scenario("gas", 7), [(0, 0.0, 0.1), (1, 10.0, float("nan"))])
    assert main(["report", str(tmp_path / "nan_a"), str(tmp_path / "nan_b"), "--out", str(out)]) == 0
    assert "counted once\n" in (out / "report.md").read_text()


def test_links_back_up_the_tree_are_walked_once(tmp_path):
    """Three links to the parent in one folder made the walk exponential (it ran for minutes); each run
    is found once, and a link to a run folder still counts."""
    root = tmp_path / "received"
    make_run(root / "a", "seed1", _scenario("gas", 1), [(0, 0.0, 0.1), (1, 10.0, 0.5)])
    elsewhere = make_run(tmp_path / "mine", "seed2", _scenario("gas", 2), [(0, 0.0, 0.1), (1, 10.0, 0.6)])
    for name in ("l1", "l2", "l3"):
        (root / "a" / name).symlink_to(root, target_is_directory=True)
    (root / "b").symlink_to(elsewhere, target_is_directory=True)
    found, skipped = find_runs([root])
    assert sorted(r.path.relative_to(root).as_posix() for r in found) == ["a/seed1", "b"]
    assert not skipped


def test_an_option_the_run_never_read_neither_splits_a_group_nor_labels_it(tmp_path):
    """A sweep of partition x alpha: the iid runs ignore data.alpha, so their two alphas are one setting
    (a second seed-1 run counted once) and its label names no alpha; the Dirichlet runs are two settings."""
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (1, 10.0, 0.5)]
    for partition in ("iid", "dirichlet"):
        for alpha in (0.1, 1.0):
            scenario = _scenario("fedavg", 1, partition)
            scenario["data"]["alpha"] = alpha
            make_run(root, f"{partition}_{alpha}", scenario, curve)
    text = _report_md(root, tmp_path / "rep")
    assert "# Report: 3 runs in 3 groups" in text
    assert "| data.partition=iid | fedavg | 1 |" in text
    assert "| data.alpha=0.1, data.partition=dirichlet | fedavg | 1 |" in text
    assert "| data.alpha=1.0, data.partition=dirichlet | fedavg | 1 |" in text
    assert "<unused>" not in text
    assert f"- `{root / 'iid_1.0'}`: the same setting and seed 1 as {root / 'iid_0.1'}: counted once" in text


def test_a_method_parameter_the_run_never_read_neither_splits_a_group_nor_labels_it(tmp_path):
    """GAS without logit adjustment never reads la_tau: runs that differ only there are one setting, while
    la_tau with logit adjustment splits them (declared in GASParams with ``applies``)."""
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (1, 10.0, 0.5)]
    for adjusted in (True, False):
        for tau in (0.5, 1.0):
            params = {"logit_adjustment": adjusted, "la_tau": tau}
            make_run(root, f"la{adjusted}_{tau}", _scenario("gas", 1, params=params), curve)
    text = _report_md(root, tmp_path / "rep")
    assert "# Report: 3 runs in 3 groups" in text
    assert "| all runs | gas (logit_adjustment=False) | 1 |" in text
    assert "| all runs | gas (la_tau=0.5, logit_adjustment=True) | 1 |" in text
    assert "| all runs | gas (la_tau=1.0, logit_adjustment=True) | 1 |" in text
    assert (
        f"- `{root / 'laFalse_1.0'}`: the same setting and seed 1 as {root / 'laFalse_0.5'}: counted once"
        in text
    )


def test_a_diagnostic_parameter_neither_splits_a_group_nor_labels_it(tmp_path):
    """GAS's gradient-dissimilarity meter (``dissimilarity_every``, declared diagnostic) changes no number:
    seeds with and without it are one group, named by no meter option; a read parameter still splits."""
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (1, 10.0, 0.5)]
    plain = {"logit_adjustment": True}
    meter = {"dissimilarity_every": 5, "dissimilarity_samples": 256}
    make_run(root, "meter_seed1", _scenario("gas", 1, params={**plain, **meter}), curve)
    make_run(root, "plain_seed2", _scenario("gas", 2, params=plain), curve)
    make_run(root, "plain_seed1", _scenario("gas", 1, params=plain), curve)
    make_run(root, "la_seed1", _scenario("gas", 1, params={**meter, "logit_adjustment": False}), curve)
    text = _report_md(root, tmp_path / "rep")
    assert "# Report: 3 runs in 2 groups" in text
    assert "| all runs | gas (logit_adjustment=True) | 2 |" in text
    assert "| all runs | gas (logit_adjustment=False) | 1 |" in text
    assert "dissimilarity" not in text
    counted_once = f"the same setting and seed 1 as {root / 'meter_seed1'}: counted once"
    assert f"- `{root / 'plain_seed1'}`: {counted_once}" in text


def test_a_labelled_data_axis_names_settings_not_methods(tmp_path):
    """[link.data] label = ["s2", "a0.1"] over one method: the rows are that method on two settings (the
    labels of an axis that sets no [algorithm] key do not name the method)."""
    root = tmp_path / "sweep"
    trials = {}
    for label, partition in (("s2", "shard"), ("a0.1", "dirichlet")):
        for seed in (1, 2):
            name = f"seed{seed}_{label}"
            make_run(root, name, _scenario("ca2fl", seed, partition), [(0, 0.0, 0.1), (1, 10.0, 0.5)])
            trials[name] = {
                "status": "finished",
                "labels": {"data": label},
                "label_keys": {"data": ["data"]},
            }
    (root / "sweep.json").write_text(json.dumps({"trials": trials}))
    text = _report_md(root, tmp_path / "rep")
    assert "| data.partition=shard | ca2fl | 2 |" in text
    assert "| data.partition=dirichlet | ca2fl | 2 |" in text


def test_paired_takes_an_algorithms_name_for_the_one_label_its_runs_have(tmp_path, capsys):
    """A sweep labels CA2FL "ca2fl_code_aliased"; ``--paired "ca2fl vs fedavg"`` picks that label."""
    root = tmp_path / "sweep"
    trials = {}
    for label, algorithm, curve in (
        ("ca2fl_code_aliased", "ca2fl", [(0, 0.0, 0.1), (1, 10.0, 0.6)]),
        ("fedavg", "fedavg", [(0, 0.0, 0.1), (1, 10.0, 0.5)]),
    ):
        for seed in (1, 2):
            name = f"seed{seed}_{label}"
            make_run(root, name, _scenario(algorithm, seed), curve)
            trials[name] = {"labels": {"method": label}, "label_keys": {"method": ["algorithm.name"]}}
    (root / "sweep.json").write_text(json.dumps({"trials": trials}))
    out = tmp_path / "rep"
    assert main(["report", str(root), "--out", str(out), "--paired", "ca2fl vs fedavg"]) == 0
    text = (out / "report.md").read_text()
    assert (
        "| ca2fl_code_aliased | +10.00 | +10.00 | +10.00 ± 0.00 (0.00) | [+10.00, +10.00] | 2 / 0 |" in text
    )
    # Both labels start with their algorithm's name: no legend.
    assert "Method labels" not in text
    assert main(["report", str(root), "--out", str(out), "--paired", "fedbuff vs fedavg"]) == 2
    assert "'fedbuff' is not a method of these runs; choose one of 'ca2fl_code_aliased', 'fedavg'" in (
        capsys.readouterr().err
    )


def test_sweep_json_records_which_keys_each_labelled_axis_sets(tmp_path):
    from raysfl.sweep.execute import _trial_entries
    from raysfl.sweep.spec import load_sweep

    _tiny_base(tmp_path)
    (tmp_path / "s.toml").write_text(
        'base = "tiny.toml"\n[link.method]\nlabel = ["mc", "avg"]\n'
        '"algorithm.name" = ["splitfed_v1", "fedavg"]\n'
        '[link.data]\nlabel = ["iid", "shard"]\n"data.partition" = ["iid", "shard"]\n'
    )
    entry = _trial_entries(load_sweep(tmp_path / "s.toml"))["mc_iid"]
    assert entry["labels"] == {"method": "mc", "data": "iid"}
    assert entry["label_keys"] == {"method": ["algorithm.name"], "data": ["data.partition"]}
    assert raysfl.report.runs.method_axis_labels(entry) == {"method": "mc"}


def test_label_names_the_runs_made_outside_their_sweeps_folder(tmp_path):
    """`--label NAME=DIR` names loose runs (reruns of one seed) as their sweep's link labels would."""
    sweep = tmp_path / "sweep"
    trials = {}
    for seed in (1, 2):
        make_run(sweep, f"fedbuff_code_{seed}", _scenario("fedbuff", seed), [(0, 0.0, 0.1), (1, 10.0, 0.5)])
        trials[f"fedbuff_code_{seed}"] = {"status": "finished", "labels": {"method": "fedbuff_code"}}
    (sweep / "sweep.json").write_text(json.dumps({"trials": trials}))
    loose = tmp_path / "reruns"
    make_run(loose, "fedbuff_code_3", _scenario("fedbuff", 3), [(0, 0.0, 0.1), (1, 10.0, 0.3)])
    make_run(loose, "fedavg_3", _scenario("fedavg", 3), [(0, 0.0, 0.1), (1, 10.0, 0.6)])

    def names(labels=()):
        found, _ = find_runs([sweep, loose], labels)
        return {r.path.name: r.info.get("labels") for r in found}

    # Without --label the rerun has no sweep label: its group's labels differ and it is named "fedbuff".
    assert names()["fedbuff_code_3"] is None
    assert sorted(method_labels(group_runs(find_runs([sweep, loose])[0])).values()) == ["fedavg", "fedbuff"]
    # A glob pattern, expanded by raysfl, picks the rerun and not FedAvg's run beside it.
    labelled = names([f"fedbuff_code={loose}/fedbuff_code_*"])
    assert labelled["fedbuff_code_3"] == {"method": "fedbuff_code"}
    assert labelled["fedavg_3"] is None
    out = tmp_path / "rep"
    pattern = f"fedbuff_code={loose}/fedbuff_code_*"
    assert main(["report", str(sweep), str(loose), "--out", str(out), "--label", pattern]) == 0
    text = (out / "report.md").read_text()
    assert "| fedbuff_code | 3 |" in text
    # A label given over a sweep's own link labels wins.
    assert names([f"buffered={sweep}"])["fedbuff_code_1"] == {"method": "buffered"}


def test_label_errors_name_the_flag(tmp_path, capsys):
    root = tmp_path / "runs"
    make_run(root, "fedavg_1", _scenario("fedavg", 1), [(0, 0.0, 0.1), (1, 10.0, 0.5)])
    (tmp_path / "empty").mkdir()
    cases = {
        "fedavg": "is not NAME=DIR",
        "=runs": "is not NAME=DIR",
        f"x={tmp_path}/nothing_*": "names no directory",
        f"x={tmp_path / 'empty'}": "x names none of the finished runs",
    }
    for spec, message in cases.items():
        assert main(["report", str(root), "--out", str(tmp_path / "rep"), "--label", spec]) == 2
        err = capsys.readouterr().err
        assert "--label" in err and message in err, (spec, err)
    twice = ["--label", f"a={root}", "--label", f"b={root / 'fedavg_1'}"]
    assert main(["report", str(root), "--out", str(tmp_path / "rep"), *twice]) == 2
    assert "is named a and b" in capsys.readouterr().err


def _read_runs_csv(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_runs_csv_holds_each_counted_runs_values_at_full_precision(runs, tmp_path):
    precise = 0.7123456789012345  # report.md shows 71.23; the CSV must give back this very float
    make_run(runs, "gas_s6", _scenario("gas", 6), [(0, 0.0, 0.1), (1, 9.0, 0.61), (2, 18.0, precise)])
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--target", "0.6", "--last", "2"]) == 0
    assert "[runs.csv](runs.csv)" in (out / "report.md").read_text()
    rows = _read_runs_csv(out / "runs.csv")
    assert list(rows[0]) == [
        "setting", "method", "algorithm", "seed", "run", "final_accuracy", "best_accuracy",
        "last2_accuracy", "emulated_to_0.6", "evaluations", "bytes_up", "bytes_down", "wall_s",
        "diverged_at", "processors",
    ]  # fmt: skip
    # the counted runs only (not the unfinished gas_s4, the interrupted gas_s5), a group's seeds in order
    assert sorted(Path(r["run"]).name for r in rows) == [
        "fedavg_s1", "fedavg_s2", "gas_iid", "gas_s1", "gas_s2", "gas_s3", "gas_s6",
    ]  # fmt: skip
    gas = [r for r in rows if r["algorithm"] == "gas" and Path(r["run"]).name != "gas_iid"]
    assert [int(r["seed"]) for r in gas] == [1, 2, 3, 6]
    assert float(gas[3]["final_accuracy"]) == precise and float(gas[3]["best_accuracy"]) == precise
    assert float(gas[3]["last2_accuracy"]) == (0.61 + precise) / 2  # the same fsum mean the tables use
    assert [r["emulated_to_0.6"] for r in gas] == ["20.0", "12.0", "", "9.0"]  # seed 3 never reaches it
    assert {r["evaluations"] for r in gas} == {"3"}
    assert gas[0]["bytes_up"] == str(2 * 2**20) and gas[0]["wall_s"] == "1.0"
    assert {r["diverged_at"] for r in rows} == {""} and {r["processors"] for r in rows} == {""}
    assert {r["setting"] for r in gas} != {r["setting"] for r in rows if Path(r["run"]).name == "gas_iid"}


def test_runs_csv_names_a_diverged_run_and_leaves_unused_columns_out(tmp_path):
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (1, 10.0, 0.3), (2, 20.0, 0.1)]
    placement = {
        "device": "cpu",
        "processor": "AMD EPYC 7B13",
        "pool_processors": ["Intel Xeon", "AMD EPYC 7B13"],
    }
    make_run(root, "gas_s1", _scenario("gas", 1), curve, loss=[2.3, 1.9, float("nan")], placement=placement)
    out = tmp_path / "rep"
    assert main(["report", str(root), "--out", str(out)]) == 0
    (row,) = _read_runs_csv(out / "runs.csv")
    assert "last2_accuracy" not in row and not any(k.startswith("emulated_to") for k in row)
    assert row["diverged_at"] == "2" and row["final_accuracy"] == "0.1" and row["best_accuracy"] == "0.3"
    assert row["processors"] == "AMD EPYC 7B13; Intel Xeon"


def test_a_gpu_servers_model_counts_in_the_processors_a_pairing_compares(tmp_path):
    """A GPU server computes the server part's arithmetic: two GPU models, or a GPU against a CPU, differ."""
    from raysfl.report.paired import computed_on, cross_processor_seeds

    xeon = "Intel(R) Xeon(R) CPU @ 2.20GHz"
    servers = {  # (method, seed): the server's (device, device_name); the pools are one Xeon throughout
        ("gas", 1): ("cuda:0", "NVIDIA H100 80GB HBM3"), ("fedavg", 1): ("cuda:0", "NVIDIA A100-SXM4-40GB"),
        ("gas", 2): ("cuda:0", "NVIDIA H100 80GB HBM3"), ("fedavg", 2): ("cpu", "cpu"),
        ("gas", 3): ("cuda:0", "NVIDIA H100 80GB HBM3"), ("fedavg", 3): ("cuda:0", "NVIDIA H100 80GB HBM3"),
    }  # fmt: skip
    root = tmp_path / "runs"
    for (algorithm, seed), (device, name) in servers.items():
        placement = {"device": device, "device_name": name, "processor": xeon, "pool_processors": [xeon]}
        curve = [(0, 0.0, 0.1), (1, 1.0, 0.5)]
        make_run(root, f"{algorithm}_{seed}", _scenario(algorithm, seed), curve, placement=placement)
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([root])[0])}
    gas_1 = next(r for r in groups["gas_1"].runs if r.seed == 1)
    assert computed_on(gas_1) == {"GPU NVIDIA H100 80GB HBM3", xeon}
    assert cross_processor_seeds(groups["gas_1"], groups["fedavg_1"]) == (1, 2)  # seed 3: the same H100


def test_a_seed_without_a_finite_value_is_left_out_of_the_pairing_and_its_n(tmp_path):
    from raysfl.report.paired import paired_difference

    root = tmp_path / "runs"
    finals = {("gas", 1): 0.60, ("gas", 2): 0.70, ("gas", 3): float("nan"), ("fedavg", 1): 0.50}
    finals |= {("fedavg", 2): 0.62, ("fedavg", 3): 0.55}
    for (algorithm, seed), final in finals.items():
        curve = [(0, 0.0, 0.1), (1, 1.0, 0.4)]
        make_run(root, f"{algorithm}_{seed}", _scenario(algorithm, seed), curve, final_accuracy=final)
    groups = {g.runs[0].path.name: g for g in group_runs(find_runs([root])[0])}
    diff = paired_difference(groups["gas_1"], groups["fedavg_1"])
    assert diff.seeds == (1, 2) and diff.differences == (pytest.approx(10.0), pytest.approx(8.0))
    assert diff.standard_error == pytest.approx(math.sqrt(2.0) / math.sqrt(2))  # n = 2, not 3
    low, high = diff.interval()
    assert high - low == pytest.approx(2 * 12.7062 * 1.0, abs=1e-3)  # one degree of freedom


def test_one_label_over_two_method_variants_is_told_apart_by_their_parameters(tmp_path):
    """`--label X=DIR` over GAS with and without `generate`: two rows, each pairable, neither dropped."""
    root = tmp_path / "runs"
    for seed in (1, 2):
        for generate, acc in ((True, 0.51), (False, 0.31)):
            scenario = _scenario("gas", seed, params={"generate": generate})
            make_run(
                root / "x", f"gas_{generate}_{seed}", scenario, [(0, 0.0, 0.1), (1, 1.0, acc + seed / 100)]
            )
        make_run(root, f"fedbuff_{seed}", _scenario("fedbuff", seed), [(0, 0.0, 0.1), (1, 1.0, 0.40)])
    out = tmp_path / "rep"
    argv = ["report", str(root), "--out", str(out), "--label", f"x={root / 'x'}"]
    assert main([*argv, "--paired", "x (generate=True) vs fedbuff", "--paired", "fedbuff"]) == 0
    text = (out / "report.md").read_text()
    assert "| all runs | x (generate=False) | 2 | 32.50 ± 0.71 |" in text
    assert "| all runs | x (generate=True) | 2 | 52.50 ± 0.71 |" in text
    assert "| x (generate=True) | +12.00 | +13.00 |" in text  # paired with fedbuff, the True variant's
    assert "| x (generate=False) | -8.00 | -7.00 |" in text  # fedbuff's own table pairs both
    # one variant in each of two settings (a sweep's per-setting parameters) is one method: it stays "x"
    from raysfl.report.markdown import _told_apart

    apart = tmp_path / "apart"
    for partition, generate in (("shard", True), ("iid", False)):
        scenario = _scenario("gas", 1, partition, params={"generate": generate})
        make_run(apart, f"gas_{partition}", scenario, [(0, 0.0, 0.1), (1, 1.0, 0.5)])
    groups = group_runs(find_runs([apart])[0])
    assert len(groups) == 2
    assert list(_told_apart(groups, {id(g): "x" for g in groups}).values()) == ["x", "x"]


def test_a_difference_below_half_a_hundredth_shows_the_side_it_counts_on(tmp_path):
    from raysfl.report.paired import paired_table

    root = tmp_path / "runs"
    for seed, (a, b) in enumerate([(0.50004, 0.5), (0.49996, 0.5), (0.5, 0.5)], start=1):
        make_run(root, f"gas_{seed}", _scenario("gas", seed), [(0, 0.0, 0.1), (1, 1.0, a)])
        make_run(root, f"fedavg_{seed}", _scenario("fedavg", seed), [(0, 0.0, 0.1), (1, 1.0, b)])
    groups = group_runs(find_runs([root])[0])
    (row,) = [
        line
        for line in paired_table(groups, [g.method["name"] for g in groups], "fedavg")
        if "| gas |" in line
    ]
    # +0.004 and -0.004 points: counted ahead and behind, so printed with their signs; only the tie is 0.00
    assert row.startswith("| gas | +0.00 | -0.00 | 0.00 |") and row.endswith("| 1 / 1 |")


def test_bytes_and_wall_means_leave_out_a_summary_that_does_not_record_them(tmp_path):
    root = tmp_path / "runs"
    curve = [(0, 0.0, 0.1), (4, 10.0, 0.5)]  # 4 MiB up, 2 MiB down, 2.0 wall s as make_run records
    make_run(root, "gas_1", _scenario("gas", 1), curve)
    old = make_run(root, "gas_2", _scenario("gas", 2), curve)
    summary = json.loads((old / "summary.json").read_text())
    for key in ("bytes_up", "bytes_down", "wall_s"):
        del summary[key]  # a summary written before these were recorded
    (old / "summary.json").write_text(json.dumps(summary))
    (group,) = group_runs(find_runs([root])[0])
    stats = group_stats(group, target=None)
    assert (stats.mib_up, stats.mib_down, stats.wall) == (4.0, 2.0, (2.0, None))  # not halved by a 0
    assert stats.counted["up"] == stats.counted["wall"] == 1
    out = tmp_path / "rep"
    assert main(["report", str(root), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "| 4.0 (1/2) | 2.0 (1/2) | 2.0 (1/2) |" in text
    assert "A MiB or wall s cell with (k/n) is over the k runs whose summary.json records it." in text
    rows = {Path(r["run"]).name: r for r in _read_runs_csv(out / "runs.csv")}
    assert (rows["gas_2"]["bytes_up"], rows["gas_2"]["wall_s"]) == ("", "")
    assert (rows["gas_1"]["bytes_up"], rows["gas_1"]["wall_s"]) == (str(4 * 2**20), "2.0")


def test_a_report_whose_summaries_record_bytes_and_wall_adds_no_note_about_them(runs, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out)]) == 0
    assert "A MiB or wall s cell" not in (out / "report.md").read_text()
