"""`raysfl pool`: several reports' runs.csv read as one set of runs, numbers checked by hand."""

import csv
import doctest
import math
from pathlib import Path

import pytest

import raysfl.report.pool
from raysfl.cli import main
from raysfl.report.pool import pool_tables, pooled_markdown
from tests.unit.sweep.test_report import _scenario, make_run

HEADER = ["setting", "method", "algorithm", "seed", "run"]
HEADER += [
    "final_accuracy",
    "best_accuracy",
    "last3_accuracy",
    "emulated_to_0.3",
    "evaluations",
    "processors",
]


def write_csv(path: Path, rows: list[dict], header: list[str] = HEADER) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in header})
    return path


def row(
    method: str, seed: int, final: float, last3: float | str = "", cpu: str = "CPU A", to_target: str = ""
) -> dict:
    return {
        "setting": "all runs",
        "method": method,
        "algorithm": method.split("_")[0],
        "seed": seed,
        "run": f"runs/{method}_{seed}",
        "final_accuracy": repr(final),
        "best_accuracy": repr(final),
        "last3_accuracy": last3 if isinstance(last3, str) else repr(last3),
        "emulated_to_0.3": to_target,
        "evaluations": 5,
        "processors": cpu,
    }


@pytest.fixture
def two_reports(tmp_path):
    """Seeds 1-2 in one report, seed 3 in a rerun with --seeds 3 (another processor)."""
    first = write_csv(
        tmp_path / "a" / "runs.csv",
        [row("fedasmu", 1, 0.30, 0.31, to_target="200.0"), row("fedasmu", 2, 0.32, 0.33, to_target="340.5")]
        + [row("fedasmu_steps", 1, 0.34, 0.35, to_target="150.0")]
        + [row("fedasmu_steps", 2, 0.33, 0.335, to_target="360.5")],
    )
    second = write_csv(
        tmp_path / "b" / "runs.csv",
        [row("fedasmu", 3, 0.28, 0.29, "CPU B"), row("fedasmu_steps", 3, 0.27, 0.30, "CPU B", "90.0")],
    )
    return first, second


def test_pooled_paired_differences_are_the_hand_computed_ones(two_reports):
    pool = pool_tables(two_reports)
    assert pool.columns == ("final_accuracy", "last3_accuracy", "emulated_to_0.3")  # best_* only if asked
    assert [(r.method, r.seed) for r in pool.of("all runs", "fedasmu_steps")] == [
        ("fedasmu_steps", 1), ("fedasmu_steps", 2), ("fedasmu_steps", 3),
    ]  # fmt: skip
    text = pooled_markdown(pool, ["fedasmu_steps vs fedasmu"])
    # last-3 differences +4.0, +0.5, +1.0 points: mean 1.8333, std sqrt(((2.1667)^2+(1.3333)^2+(0.8333)^2)/2)
    diffs = [4.0, 0.5, 1.0]
    mean = sum(diffs) / 3
    std = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    se = std / math.sqrt(3)
    half = 4.302652729911275 * se  # t(0.975, 2)
    assert f"{mean:+.2f} ± {std:.2f} ({se:.2f})" == "+1.83 ± 1.89 (1.09)"
    expected = (
        f"| fedasmu_steps | +4.00 | +0.50 | +1.00 | +1.83 ± 1.89 (1.09) | "
        f"[{mean - half:+.2f}, {mean + half:+.2f}] | 3 / 0 |"
    )
    assert expected in text.splitlines()
    # finals +4.0, +1.0, -1.0 points: mean 4/3, std sqrt(19/3), one seed behind
    half = 4.302652729911275 * math.sqrt(19 / 3) / math.sqrt(3)
    assert f"[{4 / 3 - half:+.2f}, {4 / 3 + half:+.2f}]" == "[-4.92, +7.58]"
    assert "| fedasmu_steps | +4.00 | +1.00 | -1.00 | +1.33 ± 2.52 (1.45) | [-4.92, +7.58] | 2 / 1 |" in text
    # per method: mean ± std of the three seeds in %, and the processors that computed them
    assert (
        "| fedasmu | 3 | 1, 2, 3 | 30.00 ± 2.00 | 31.00 ± 2.00 | 270.2 ± 99.3 (2/3) | CPU A; CPU B |" in text
    )
    # times in s: seed 3's baseline never reached 0.3, so two seeds pair: -50 and +20 s, one sooner
    assert "Paired with `fedasmu`, emulated_to_0.3 (s, method − fedasmu, on the seeds both ran):" in text
    assert (
        "| method | seed 1 | seed 2 | seed 3 | mean ± std (SE) | 95 % interval (t) | later / sooner |" in text
    )
    assert (
        "| fedasmu_steps | -50.00 | +20.00 |  | -15.00 ± 49.50 (35.00) | [-459.72, +429.72] | 1 / 1 |" in text
    )
    assert "different processors" not in text  # every pair was computed on one processor


def test_a_pair_computed_on_two_processors_is_named(tmp_path):
    table = write_csv(
        tmp_path / "runs.csv",
        [row("a", 1, 0.5), row("b", 1, 0.4), row("a", 2, 0.5, cpu="CPU B"), row("b", 2, 0.4)],
    )
    text = pooled_markdown(pool_tables([table], ["final_accuracy"]), ["a vs b"])
    assert "Seed 2 of `a` − `b` pair runs computed on different processors" in text
    assert "| a | 2 | 1, 2 | 50.00 ± 0.00 | CPU A; CPU B |" in text


def test_a_seed_missing_a_value_is_left_out_of_n_and_counted_in_the_cell(tmp_path):
    table = write_csv(tmp_path / "runs.csv", [row("a", 1, 0.5, 0.4), row("a", 2, 0.6), row("b", 1, 0.5, 0.5)])
    text = pooled_markdown(pool_tables([table]), ["a vs b"])
    assert "| a | 2 | 1, 2 | 55.00 ± 7.07 | 40.00 (1/2) | - (0/2) | CPU A |" in text
    assert "| a | -10.00 | -10.00 | - | 0 / 1 |" in text  # last-3: one seed, no spread, no interval


def test_one_run_read_by_two_reports_counts_once_and_two_runs_of_one_seed_are_refused(tmp_path):
    same = [row("a", 1, 0.5, 0.45), row("b", 1, 0.4, 0.41)]
    first = write_csv(tmp_path / "a" / "runs.csv", same)
    second = write_csv(tmp_path / "b" / "runs.csv", same[:1] + [row("a", 2, 0.6, 0.55)])
    pool = pool_tables([first, second])
    assert len(pool.runs) == 3 and len(pool.repeated) == 1
    assert "seed 1 of 'a' (all runs)" in pool.repeated[0] and "counted once" in pool.repeated[0]
    other = write_csv(tmp_path / "c" / "runs.csv", [row("a", 1, 0.52, 0.45)])
    with pytest.raises(ValueError, match=r"seed 1 of 'a' \(all runs\) is in .* with different values"):
        pool_tables([first, other])


def test_bad_input_names_the_file_and_the_allowed_columns(tmp_path, capsys):
    good = write_csv(tmp_path / "a" / "runs.csv", [row("a", 1, 0.5, 0.4)])
    without_last = [c for c in HEADER if c != "last3_accuracy"]
    no_last = write_csv(tmp_path / "b" / "runs.csv", [row("a", 2, 0.5)], without_last)
    assert pool_tables([good, no_last]).columns == ("final_accuracy", "emulated_to_0.3")  # what both hold
    with pytest.raises(ValueError, match=r"b/runs.csv has no 'last3_accuracy' \(its columns to pool: final"):
        pool_tables([good, no_last], ["last3_accuracy"])
    with pytest.raises(
        ValueError, match=r"'wall_s' is not an accuracy column or a time to a target; allowed"
    ):
        pool_tables([good], ["wall_s"])
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"not a report's runs.csv \(no column 'setting', 'method'"):
        pool_tables([tmp_path / "x.csv"])
    broken = write_csv(tmp_path / "c" / "runs.csv", [{**row("a", 1, 0.5), "final_accuracy": "high"}])
    with pytest.raises(ValueError, match=r"c/runs.csv line 2: column 'final_accuracy' holds 'high'"):
        pool_tables([broken])
    short = tmp_path / "d" / "runs.csv"
    short.parent.mkdir()
    short.write_text(",".join(HEADER) + "\nall runs,a,a,1,runs/a_1\n")
    with pytest.raises(ValueError, match=r"d/runs.csv line 2: the line ends before column 'final_accuracy'"):
        pool_tables([short])
    assert main(["pool", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert "pool:" in err and "missing.csv: no such file" in err
    assert main(["pool", str(good), "--paired", "nope"]) == 2
    assert "--paired: 'nope' is not a method of these runs" in capsys.readouterr().err


def test_pooling_a_reports_own_runs_csv_gives_its_paired_table(tmp_path):
    """Read back, runs.csv gives the very rows `raysfl report` computed from the run folders."""
    root = tmp_path / "runs"
    finals = {1: (0.62, 0.60), 2: (0.50, 0.55), 3: (0.7123456789, 0.64)}
    for seed, (gas, fedavg) in finals.items():
        for name, end in (("gas", gas), ("fedavg", fedavg)):
            curve = [(0, 0.0, 0.1), (1, 1.0, 0.3), (2, 2.0, end)]
            make_run(root, f"{name}_{seed}", _scenario(name, seed), curve)
    out = tmp_path / "rep"
    assert main(["report", str(root), "--out", str(out), "--last", "2", "--paired", "fedavg"]) == 0
    report = (out / "report.md").read_text().splitlines()
    pooled_out = tmp_path / "new" / "pooled.md"  # a folder that does not exist yet
    assert main(["pool", str(out / "runs.csv"), "--paired", "fedavg", "--out", str(pooled_out)]) == 0
    pooled = pooled_out.read_text().splitlines()
    gas_rows = [line for line in report if line.startswith("| gas | ")]
    assert len(gas_rows) == 3  # the per-seed row, then the final and the last-2 paired rows
    assert gas_rows[1:] == [line for line in pooled if line.startswith("| gas | +")]


def test_docstring_examples_hold():
    result = doctest.testmod(raysfl.report.pool)
    assert result.failed == 0 and result.attempted > 0


def test_each_setting_pairs_its_own_runs_and_one_without_the_baseline_says_so(tmp_path):
    iid = [{**row("a", s, 0.5 + 0.01 * s), "setting": "iid"} for s in (1, 2)]
    iid += [{**row("b", s, 0.5), "setting": "iid"} for s in (1, 2)]
    shard = [{**row("a", s, 0.4), "setting": "shard"} for s in (1, 2)]
    table = write_csv(tmp_path / "runs.csv", iid + shard)
    text = pooled_markdown(pool_tables([table], ["final_accuracy"]), ["a vs b"])
    iid_part, shard_part = text.split("## shard")
    assert "| a | +1.00 | +2.00 | +1.50 ± 0.71 (0.50) | [-4.85, +7.85] | 2 / 0 |" in iid_part
    assert "| a | 2 | 1, 2 | 40.00 ± 0.00 | CPU A |" in shard_part
    assert "No `b` runs in this setting: nothing to pair with." in shard_part
    with pytest.raises(
        ValueError, match=r"--paired: 'c' is not a method of these runs; choose one of 'a', 'b'"
    ):
        pooled_markdown(pool_tables([table]), ["a vs c"])
