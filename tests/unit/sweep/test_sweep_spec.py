"""Sweep files: expansion into trials, names, linked axes, resources, and every bad input listed at once."""

from pathlib import Path

import pytest

from raysfl.cli import main
from raysfl.config import ConfigError
from raysfl.sweep.execute import SweepCommand, SweepResult, print_interrupted, print_outcome
from raysfl.sweep.resources import trial_resources
from raysfl.sweep.spec import load_sweep, set_dotted
from tests.scenarios import tiny_gas_toml

TINY = tiny_gas_toml(global_iterations=2)  # the sweeps below [set] 3

GOOD = """
base = "scen/tiny.toml"
[set]
"train.global_iterations" = 3
[link.method]
"algorithm.name" = ["gas", "fedavg"]
"algorithm.params" = [{ q_s = 4, q_c = 4 }, {}]
[grid]
seed = [1, 2, 3]
"train.lr" = [0.01, 0.05]
"""


def _write(tmp_path: Path, sweep: str, name: str = "s.toml") -> Path:
    (tmp_path / "scen").mkdir(exist_ok=True)
    (tmp_path / "scen" / "tiny.toml").write_text(TINY)
    path = tmp_path / name
    path.write_text(sweep)
    return path


def test_the_product_of_axes_in_file_order_with_readable_names(tmp_path):
    sweep = load_sweep(_write(tmp_path, GOOD))
    names = [t.name for t in sweep.trials]
    assert len(names) == 2 * 3 * 2
    assert names[:3] == ["gas_seed1_lr0.01", "gas_seed1_lr0.05", "gas_seed2_lr0.01"]
    assert names[-1] == "fedavg_seed3_lr0.05"
    last = sweep.trials[-1].scenario
    assert (last.algorithm.name, last.seed, last.train.lr) == ("fedavg", 3, 0.05)
    assert last.train.global_iterations == 3  # [set] applies to every trial
    assert last.name == "fedavg_seed3_lr0.05"
    first = sweep.trials[0].scenario
    assert first.params.q_s == 4 and first.data.synthetic_train == 600  # the base is kept elsewhere


def test_link_tables_count_where_the_first_of_them_stands(tmp_path):
    """[link.a] [grid] [link.b]: TOML gathers both link tables into one, so b comes before the grid too."""
    sweep = load_sweep(
        _write(
            tmp_path,
            """
base = "scen/tiny.toml"
[link.lr]
label = ["slow", "fast"]
"train.lr" = [0.01, 0.05]
[grid]
seed = [1, 2]
[link.method]
"algorithm.name" = ["gas", "fedavg"]
"algorithm.params" = [{ q_s = 4, q_c = 4 }, {}]
""",
        )
    )
    names = [t.name for t in sweep.trials]
    assert names[:3] == ["slow_gas_seed1", "slow_gas_seed2", "slow_fedavg_seed1"]


def test_linked_axes_change_together_and_labels_name_them(tmp_path):
    text = GOOD.replace("[link.method]\n", '[link.method]\nlabel = ["GAS", "FedAvg+"]\n')
    sweep = load_sweep(_write(tmp_path, text))
    assert {t.name.split("_")[0] for t in sweep.trials} == {"GAS", "FedAvg"}  # '+' is not a safe character
    for t in sweep.trials:
        algo = dict(t.assignments)["algorithm.name"]
        assert t.scenario.algorithm.name == algo
        assert (t.scenario.algorithm.params == {}) == (algo == "fedavg")


def test_set_dotted_replaces_whole_tables():
    doc = {"algorithm": {"name": "gas", "params": {"q_s": 4}}}
    set_dotted(doc, "algorithm.params", {})
    set_dotted(doc, "train.lr", 0.1)
    assert doc == {"algorithm": {"name": "gas", "params": {}}, "train": {"lr": 0.1}}
    with pytest.raises(ValueError, match="not a table"):
        set_dotted(doc, "algorithm.name.x", 1)


def _problems(tmp_path, text) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_sweep(_write(tmp_path, text))
    return err.value.problems


def test_every_problem_of_a_bad_sweep_is_listed_at_once(tmp_path):
    text = """
base = "scen/tiny.toml"
bogus = 1
[grid]
seed = []
"algorithm.name" = ["gas", "fedavg"]
[link.data]
"data.dataset" = ["synthetic", "mnist"]
"model.name" = ["lenet5"]
"""
    problems = _problems(tmp_path, text)
    joined = "\n".join(problems)
    assert "bogus: unknown key of a sweep file" in joined
    assert "grid.seed: empty axis" in joined
    assert "link.data: linked axes must have the same length; data.dataset has 2, model.name has 1" in joined


def test_a_point_listed_twice_is_refused_naming_the_axis(tmp_path):
    text = """
base = "scen/tiny.toml"
[grid]
seed = [1, 2, 1]
[link.lr]
"train.lr" = [0.1, 0.01, 0.1]
"train.momentum" = [0.9, 0.9, 0.0]
"""
    # the link axis's third point differs in momentum: not a repeat
    once = "each point of an axis runs once"
    assert _problems(tmp_path, text) == [f"grid.seed: seed = 1 is listed twice; {once}"]
    text = text.replace("[0.9, 0.9, 0.0]", "[0.9, 0.9, 0.9]")
    link = "link.lr: train.lr, train.momentum = 0.1, 0.9"
    assert _problems(tmp_path, text)[-1] == f"{link} is listed twice; {once}"


def test_a_grid_value_invalid_for_one_method_names_the_trial_and_the_field(tmp_path):
    text = 'base = "scen/tiny.toml"\n[grid]\n"algorithm.name" = ["gas", "fedavg"]\nseed = [1, 2]\n'
    problems = _problems(tmp_path, text)
    assert len(problems) == 2  # said once per problem, naming the trials that have it
    assert problems[0].startswith("trial fedavg_seed1, fedavg_seed2: algorithm.params.q_s: unknown key")
    assert problems[1].startswith("trial fedavg_seed1, fedavg_seed2: algorithm.params.q_c: unknown key")


def test_a_missing_base_and_a_shared_problem_are_reported(tmp_path):
    assert "base: scenario 'nope.toml' not found" in _problems(tmp_path, 'base = "nope.toml"\n')[0]
    problems = _problems(tmp_path, 'base = "scen/tiny.toml"\n[set]\n"train.lrr" = 1\n[grid]\nseed = [1, 2]\n')
    assert problems == ["every trial: train.lrr: unknown key (did you mean 'lr'?)"]


def test_bad_sweep_files_exit_2_naming_the_field(tmp_path, capsys):
    cases = {
        "unknown.toml": ('base = "scen/tiny.toml"\nbogus = 1\n', "bogus: unknown key"),
        "empty.toml": ('base = "scen/tiny.toml"\n[grid]\nseed = []\n', "grid.seed: empty axis"),
        "method.toml": (
            'base = "scen/tiny.toml"\n[grid]\n"algorithm.name" = ["gas", "fedavg"]\n',
            "trial fedavg: algorithm.params.q_s: unknown key",
        ),
        "base.toml": ('base = "missing.toml"\n', "base: scenario 'missing.toml' not found"),
        "linked.toml": (
            'base = "scen/tiny.toml"\n[link.m]\n"algorithm.name" = ["gas"]\nseed = [1, 2]\n',
            "link.m: linked axes must have the same length",
        ),
        "malformed.toml": ("base = \n", "malformed TOML"),
    }
    for name, (text, expected) in cases.items():
        path = _write(tmp_path, text, name)
        for extra in ([], ["--dry-run"]):
            assert main(["sweep", str(path), *extra]) == 2, name
            err = capsys.readouterr().err
            assert expected in err and "Traceback" not in err, (name, err)
    assert not (tmp_path / "runs").exists()


def test_dry_run_lists_trials_and_resources_without_running(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, GOOD)
    assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "12 trials of tiny.toml" in out
    assert (
        "gas_seed1_lr0.01: algorithm.name = 'gas', algorithm.params = {'q_s': 4, 'q_c': 4}, seed = 1" in out
    )
    assert out.count("resources: driver") == 12
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_resources_one_bundle_per_actor_scaled_to_fit_a_small_machine(tmp_path):
    sweep = load_sweep(_write(tmp_path, GOOD.replace("[set]", '[set]\n"engine.pools" = 2')))
    sc = sweep.trials[0].scenario
    big = trial_resources(sc, {"CPU": 16.0})
    assert big.bundles == ({"CPU": 0.5}, {"CPU": 2.0}, {"CPU": 1.0}, {"CPU": 1.0}) and big.scale == 1.0
    gpu = trial_resources(sc, {"CPU": 16.0, "GPU": 2.0})
    assert gpu.bundles[1] == {"CPU": 2.0, "GPU": 1.0} and gpu.gpus == 1.0
    small = trial_resources(sc, {"CPU": 2.0})
    assert small.scale == pytest.approx(2.0 / 4.5)
    assert small.cpus <= 2.0 and small.cpus == pytest.approx(2.0, abs=1e-3)
    assert [b["CPU"] for b in small.bundles] == pytest.approx([0.2222, 0.8888, 0.4444, 0.4444], abs=1e-4)
    assert "scaled" in small.describe() and "2×pool" in small.describe()


def test_bundles_are_scaled_until_they_fit_node_by_node(tmp_path):
    """Three 1-CPU nodes hold 3 CPUs, but the server's 2 threads scaled to the total (1.71 CPU) fit no
    node: the trial waited forever. Every bundle now fits a node, and the trial packs onto the nodes."""
    from raysfl.engine.cluster import fits_nodes

    sweep = load_sweep(_write(tmp_path, GOOD))
    sc = sweep.trials[0].scenario  # driver 0.5 + server 2 + one pool 1 = 3.5 CPUs of threads
    nodes = [(1.0, 0.0)] * 3
    total_only = trial_resources(sc, {"CPU": 3.0})
    assert total_only.bundles[1]["CPU"] == pytest.approx(2 * 3 / 3.5, abs=1e-4)  # fits no node
    fitted = trial_resources(sc, {"CPU": 3.0}, nodes=nodes)
    assert fits_nodes(fitted.bundles, nodes) and not fits_nodes(total_only.bundles, nodes)
    assert fitted.bundles[1]["CPU"] == pytest.approx(1.0, abs=1e-4)  # the largest that fits
    ratios = [f["CPU"] / t["CPU"] for f, t in zip(fitted.bundles, total_only.bundles, strict=True)]
    assert max(ratios) - min(ratios) < 1e-3  # one factor for every bundle: the threads' proportions kept
    roomy = trial_resources(sc, {"CPU": 3.0}, nodes=[(3.0, 0.0)])  # one node of 3: no change
    assert roomy.bundles == total_only.bundles


def test_a_gpu_node_without_cpus_to_spare_gives_auto_a_cpu_server_and_refuses_cuda(tmp_path):
    """A GPU head started with --num-cpus=0 can hold no server bundle at any scale: the sweep ended with
    a bare ValueError traceback."""
    from raysfl.engine.cluster import ClusterTooSmallError, fits_nodes

    sc = load_sweep(_write(tmp_path, GOOD)).trials[0].scenario
    nodes, cluster = [(0.0, 1.0), (3.0, 0.0)], {"CPU": 3.0, "GPU": 1.0}
    auto = trial_resources(sc, cluster, nodes=nodes)
    assert "GPU" not in auto.bundles[1] and fits_nodes(auto.bundles, nodes)
    on_cuda = GOOD.replace("[set]", '[set]\n"engine.server_device" = "cuda"')
    cuda = load_sweep(_write(tmp_path, on_cuda, "c.toml"))
    with pytest.raises(ClusterTooSmallError, match="the server needs a GPU node with CPUs to spare"):
        trial_resources(cuda.trials[0].scenario, cluster, nodes=nodes)


def test_trial_cpus_scales_every_bundle_to_that_total_and_packs_more_trials(tmp_path, capsys, monkeypatch):
    sweep = load_sweep(_write(tmp_path, GOOD.replace("[set]", '[set]\n"engine.server_threads" = 1')))
    sc = sweep.trials[0].scenario  # driver 0.5 + server 1 + pool 1 = 2.5 CPUs of threads
    one = trial_resources(sc, {"CPU": 2.0}, cpus=1.0)
    assert one.scale == pytest.approx(1.0 / 2.5)
    assert [b["CPU"] for b in one.bundles] == pytest.approx([0.2, 0.4, 0.4], abs=1e-4)
    assert 0.999 <= one.cpus <= 1.0 and "scaled" in one.describe()
    # more than the actors' threads is allowed (scaled up), but never more than the cluster
    assert trial_resources(sc, {"CPU": 16.0}, cpus=5.0).cpus == pytest.approx(5.0, abs=1e-3)
    assert trial_resources(sc, {"CPU": 2.0}, cpus=8.0).cpus == pytest.approx(2.0, abs=1e-3)
    with pytest.raises(ValueError, match="--trial-cpus: 0.0 must be > 0"):
        trial_resources(sc, {"CPU": 2.0}, cpus=0.0)
    # the dry run on a 2-CPU machine: one trial at a time by default, two with --trial-cpus 1
    monkeypatch.setattr("raysfl.sweep.execute.local_resources", lambda: {"CPU": 2.0, "GPU": 0.0})
    path = _write(tmp_path, GOOD.replace("[set]", '[set]\n"engine.server_threads" = 1'), "one.toml")
    for extra, at_once in (([], 1), (["--trial-cpus", "1"], 2), (["--trial-cpus", "0.01"], 12)):
        assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "o"), *extra]) == 0
        assert f"at most {at_once} trial(s) at a time" in capsys.readouterr().out  # never more than it has
    unfinished = SweepResult(tmp_path / "o", finished=[], failed={}, unfinished=["gas_seed1"])
    assert print_outcome(unfinished, SweepCommand("s.toml", 1.0)) == 130
    assert "--out " + str(tmp_path / "o") + " --resume --trial-cpus 1`" in capsys.readouterr().err
    on_a_cluster = SweepCommand("s.toml", 1.0, "10.0.0.5:6379")
    assert print_outcome(unfinished, on_a_cluster) == 130  # a cluster's sweep: on it again
    assert " --resume --trial-cpus 1 --address 10.0.0.5:6379`" in capsys.readouterr().err
    with_data = SweepCommand("s.toml", None, None, "/data", 3)
    assert print_outcome(unfinished, with_data) == 130  # where it found its data
    assert " --resume --max-concurrent 3 --data-dir /data`" in capsys.readouterr().err
    # a second Ctrl-C ends Tune at once: the same advice when the sweep had started, else none
    assert print_interrupted(tmp_path / "o", SweepCommand("s.toml", data_dir="/data")) == 130
    assert capsys.readouterr().err == "sweep: interrupted before any trial started\n"
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "sweep.json").write_text("{}")
    assert print_interrupted(tmp_path / "o", SweepCommand("s.toml", data_dir="/data")) == 130
    assert f"--out {tmp_path / 'o'} --resume --data-dir /data`" in capsys.readouterr().err
    for bad in ("0", "-1", "nan", "inf"):
        assert main(["sweep", str(path), "--dry-run", "--trial-cpus", bad]) == 2
        err = capsys.readouterr().err
        assert "--trial-cpus" in err and "must be a number > 0" in err and "Traceback" not in err


def test_every_shipped_sweep_validates(tmp_path):
    root = Path(__file__).resolve().parents[3] / "scenarios"
    paths = sorted(root.rglob("*.sweep.toml"))
    assert paths, "no sweep file is shipped under scenarios/"
    for path in paths:
        sweep = load_sweep(path)
        assert sweep.trials, path


def test_resume_runs_the_unfinished_trials_in_the_plan_order(tmp_path):
    import json

    from raysfl.sweep.execute import trials_to_run

    names = ["seed1_a", "seed1_b", "seed2_a", "seed2_b", "seed3_a"]
    for name, summary in [
        ("seed1_a", {"interrupted": False}),  # finished
        ("seed1_b", {"interrupted": True}),  # stopped with Ctrl-C: not finished
        ("seed2_b", {"interrupted": False}),  # finished
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "seed2_a").mkdir()  # started, no summary yet (a checkpoint or nothing)
    (tmp_path / "seed3_a").mkdir()
    (tmp_path / "seed3_a" / "summary.json").write_text('{"interrupted": fal')  # cut short by a kill
    assert trials_to_run(names, tmp_path, resume=True) == ["seed1_b", "seed2_a", "seed3_a"]
    assert trials_to_run(names, tmp_path, resume=False) == names


def test_resuming_a_finished_sweep_starts_no_ray_and_a_changed_one_is_refused_first(tmp_path, monkeypatch):
    """``--resume`` of a sweep whose trials all finished says so without starting Ray (it had started Ray to
    find nothing to run); a sweep file that no longer plans the recorded trials is refused before Ray too."""
    import json

    from raysfl.sweep.execute import SweepStateError, run_sweep

    def no_ray(address: str | None = None) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr("raysfl.engine.cluster.ensure_ray", no_ray)
    sweep = load_sweep(_write(tmp_path, GOOD))
    out = tmp_path / "out"
    out.mkdir()
    names = [t.name for t in sweep.trials]
    recorded = {t.name: {"set": dict(t.assignments)} for t in sweep.trials}  # what each trial's sweep set
    (out / "sweep.json").write_text(json.dumps({"trials": recorded}))
    for name in names:
        (out / name).mkdir()
        (out / name / "summary.json").write_text(json.dumps({"interrupted": False}))
    result = run_sweep(sweep, out, resume=True)
    assert result.finished == names and not result.failed and not result.unfinished
    recorded = json.loads((out / "sweep.json").read_text())["trials"]  # a kill had left them unrecorded
    assert {n: (t["status"], t["set"]) for n, t in recorded.items()} == {
        t.name: ("finished", dict(t.assignments)) for t in sweep.trials
    }
    before = (out / "sweep.json").read_text()
    run_sweep(sweep, out, resume=True)
    assert (out / "sweep.json").read_text() == before  # nothing more to record: left as it was
    changed = load_sweep(_write(tmp_path, GOOD.replace("[0.01, 0.05]", "[0.01, 0.1]"), "changed.toml"))
    with pytest.raises(SweepStateError, match="no longer describes the sweep") as err:
        run_sweep(changed, out, resume=True)
    said = str(err.value)  # which trials are new and which are gone, and where new ones can go
    assert "new trials: gas_seed1_lr0.1, gas_seed2_lr0.1, " in said and " and 0 more" not in said
    assert "; trials it no longer plans: gas_seed1_lr0.05, " in said and "can run into another --out" in said
    (out / names[-1] / "summary.json").write_text(json.dumps({"interrupted": True}))  # one left to run
    with pytest.raises(AssertionError, match="Ray was started"):
        run_sweep(sweep, out, resume=True)


def test_a_sweep_refuses_links_planted_in_the_tune_folder(tmp_path):
    """Tune rewrites tuner.pkl and each trial's params.json and result.json: a link planted there in a
    received sweep folder (to ~/.bashrc, say) is refused before Ray starts, and its target is untouched."""
    import json

    from raysfl.sweep.execute import SweepStateError, check_out

    target = tmp_path / "bashrc"
    target.write_text("untouched\n")
    out = tmp_path / "out"
    (out / "_tune" / "gas_seed1").mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"trials": {}}))
    check_out(out, resume=True)  # a Tune folder without links is fine
    made = [out / "_tune" / "deep"]
    for _ in range(1200):  # deeper than Python's recursion limit: walked without recursion
        made.append(made[-1] / "d")
    try:
        for folder in made:
            folder.mkdir()
        check_out(out, resume=True)
        (made[-1] / "x").symlink_to(target)
        with pytest.raises(SweepStateError, match=r"d/x is a symbolic link"):
            check_out(out, resume=True)
    finally:  # removed here, whatever happened: shutil.rmtree (pytest's clean-up too) recurses
        (made[-1] / "x").unlink(missing_ok=True)
        for folder in reversed(made):
            if folder.exists():
                folder.rmdir()
    (out / "_tune" / "gas_seed1" / "params.json").symlink_to(target)
    with pytest.raises(SweepStateError, match=r"gas_seed1/params\.json is a symbolic link \(to .*bashrc\)"):
        check_out(out, resume=True)
    (out / "_tune" / "gas_seed1" / "params.json").unlink()
    (out / "_tune" / "gas_seed2").symlink_to(tmp_path)  # a linked trial folder: listed, not followed
    with pytest.raises(SweepStateError, match=r"_tune/gas_seed2 is a symbolic link"):
        check_out(out, resume=True)
    (out / "_tune" / "gas_seed2").unlink()
    (out / "_tune").rename(tmp_path / "elsewhere")
    (out / "_tune").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SweepStateError, match=r"out/_tune is a symbolic link"):
        check_out(out, resume=True)
    (out / "sweep.json").unlink()  # a new sweep into a folder holding only a linked Tune folder
    with pytest.raises(SweepStateError, match=r"out/_tune is a symbolic link"):
        check_out(out, resume=False)
    assert target.read_text() == "untouched\n"


def test_a_finished_trial_of_ten_thousand_clients_reads_as_finished(tmp_path):
    """A run's config.toml holds a device row per client: 10,000 clients make it about 1.5 MB, over the cap
    of a scenario file, and reading it for the trial's status raised a ConfigError (in the driver, when
    the trial ended). A damaged one is an unfinished trial, not an error of the sweep."""
    from raysfl.engine.runner import run
    from raysfl.scenario import scenario_from_dict
    from raysfl.sweep.execute import trials_to_run
    from raysfl.sweep.trial import stored_scenario
    from tests.scenarios import TINY_GAS

    out = tmp_path / "trial"
    run(scenario_from_dict(TINY_GAS), out, backend="local")
    planned = stored_scenario(out)
    config = out / "config.toml"
    text = config.read_text()
    row = text[text.index("[[devices]]") : text.index("[[devices]]", text.index("[[devices]]") + 1)]
    config.write_text(text + row * 10_000)  # the device table is the file's last table
    assert config.stat().st_size > 1 << 20
    assert stored_scenario(out) == planned
    from raysfl.run_files import read_config

    kept = read_config(out)  # the device table is cut before parsing; the rest is all there
    assert "devices" not in kept and kept["run"]["client_sizes"] and kept["algorithm"]["name"] == "gas"
    assert trials_to_run(["trial"], tmp_path, resume=True, planned={"trial": planned}) == []
    config.write_text("seed = [\n" + text)
    assert trials_to_run(["trial"], tmp_path, resume=True, planned={"trial": planned}) == ["trial"]


def test_a_trial_folder_with_a_damaged_summary_is_run_again_not_finished(tmp_path):
    """A summary.json cut short (the driver killed while writing it) is no finished trial: the trial starts
    over (no checkpoints) or continues (checkpoints); it raised a JSONDecodeError before."""
    import json

    from raysfl.sweep.trial import trial_state

    out = tmp_path / "seed1_a"
    out.mkdir()
    (out / "summary.json").write_text('{"interrupted": fal')
    assert trial_state(out, {"name": "x"}) == "partial"
    (out / "summary.json").write_text(json.dumps({"interrupted": False}))
    assert trial_state(out, {"name": "x"}) == "finished"


def test_the_status_file_reads_a_finished_trials_summary_once(tmp_path, monkeypatch):
    """sweep.json is rewritten as each trial ends; a trial known to be finished is not read again, so n
    trials cost n summary reads, not n²/2. The file still records every status and the failures."""
    import json

    from raysfl.report.runs import SWEEP_STATUS
    from raysfl.sweep import execute

    names = [f"seed{i}" for i in range(8)]
    reads: dict[str, int] = dict.fromkeys(names, 0)
    real = execute._trial_status

    def counted(out: Path, name: str, planned=None) -> str:  # noqa: ANN001
        reads[name] += (out / name / "summary.json").is_file()
        return real(out, name, planned)

    monkeypatch.setattr(execute, "_trial_status", counted)
    status = execute.StatusFile(tmp_path, {"trials": {n: {} for n in names}})
    status.write()
    for name in names[:-1]:  # each trial ends, and the file is rewritten, one after another
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"interrupted": False}))
        status.write()
    status.failed[names[-1]] = "RunFailedError: gave up"
    result = status.write()
    assert reads == {**dict.fromkeys(names[:-1], 1), names[-1]: 0}
    assert result.finished == names[:-1] and result.failed == {names[-1]: "RunFailedError: gave up"}
    recorded = json.loads((tmp_path / SWEEP_STATUS).read_text())["trials"]
    assert recorded[names[-1]] == {"status": "failed", "error": "RunFailedError: gave up"}


def _recorded_sweep(tmp_path: Path):
    """A sweep's plan as ``sweep.json`` records it, and its output folder."""
    import json

    from raysfl.report.runs import SWEEP_STATUS
    from raysfl.sweep.execute import _plan_doc, plan

    sweep = load_sweep(_write(tmp_path, GOOD))
    doc = _plan_doc(sweep, plan(sweep, {"CPU": 2.0}))
    out = tmp_path / "out"
    out.mkdir()
    return sweep, json.loads(json.dumps(doc)), out, out / SWEEP_STATUS


def test_a_sweep_without_axes_is_one_trial_and_the_dry_run_says_so(tmp_path, capsys):
    path = _write(tmp_path, 'base = "scen/tiny.toml"\n[set]\n"train.global_iterations" = 3\n[grid]\n')
    assert [t.name for t in load_sweep(path).trials] == ["trial"]
    assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "o")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "1 trial of tiny.toml" in first
    assert "no [grid] or [link] axis: one run of the base with [set]" in first


def test_a_resumed_dry_run_lists_finished_trials_as_not_run_again(tmp_path, capsys, monkeypatch):
    """``--resume --dry-run`` listed a finished sweep's trials as if each would run, and a --trial-cpus
    above the machine's CPUs was capped without a word."""
    import json

    monkeypatch.setattr("raysfl.sweep.execute.local_resources", lambda: {"CPU": 2.0, "GPU": 0.0})
    sweep, doc, out, status = _recorded_sweep(tmp_path)
    status.write_text(json.dumps(doc))
    names = [t.name for t in sweep.trials]
    for name in names[:10]:
        (out / name).mkdir()
        (out / name / "summary.json").write_text(json.dumps({"interrupted": False}))
    args = ["sweep", str(sweep.path), "--dry-run", "--resume", "--out", str(out), "--trial-cpus", "100"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "12 trials of tiny.toml, into " in text and "; 10 finished, 2 to run" in text
    assert f"  {names[0]} [finished, not run again]: " in text
    assert f"  {names[10]}: " in text and f"  {names[11]}: " in text
    assert text.count("resources: ") == 2
    assert "note: --trial-cpus 100 is more than the 2 CPUs here; each trial reserves 2" in text
    changed = sweep.path.read_text().replace("seed = [1, 2, 3]", "seed = [1, 2, 4]")
    sweep.path.write_text(changed)
    assert main(args) == 2  # a resume of another sweep file is refused by the dry run too
    assert "trials" in capsys.readouterr().err


def test_resume_accepts_a_sweep_recorded_before_an_option_was_added(tmp_path):
    """A newer raysfl adds options: recorded scenarios lack them, their fingerprints differ, same sweep."""
    import json

    from raysfl.config import dumps_toml
    from raysfl.sweep.execute import SweepStateError, _check_same_sweep

    _, doc, out, status = _recorded_sweep(tmp_path)
    a, b, c = list(doc["trials"])[:3]
    old = json.loads(json.dumps(doc))
    for name in (a, b, c):
        old["trials"][name]["fingerprint"] = "recorded-by-an-older-schema"
        old["trials"][name]["scenario"]["train"].pop("eval_every_s")  # an option the old schema lacked
    # a sweep.json from before scenarios were recorded: b ran (its config.toml decides), c never started
    (out / b).mkdir()
    (out / b / "config.toml").write_text(dumps_toml(old["trials"][b].pop("scenario")))
    del old["trials"][c]["scenario"]
    status.write_text(json.dumps(old))
    _check_same_sweep(out, doc)  # accepted: the same sweep under today's schema

    changed = json.loads(json.dumps(old))
    changed["trials"][a]["scenario"]["train"]["lr"] = 0.5  # really another scenario
    changed["trials"][c]["set"]["seed"] = 99  # really another sweep file
    status.write_text(json.dumps(changed))
    with pytest.raises(SweepStateError, match=f"trials that differ: {a}, {c} \\({a} differs in train.lr\\)"):
        _check_same_sweep(out, doc)


def test_the_output_directory_is_checked_before_ray_starts(tmp_path, capsys, monkeypatch):
    """A mistyped --out with --resume is refused (it used to run the whole sweep again); so is a used one."""
    import raysfl.engine.cluster
    from raysfl.cli import main
    from raysfl.report.runs import SWEEP_STATUS

    def no_ray(*_args, **_kwargs):
        raise AssertionError("Ray was started before --out was checked")

    monkeypatch.setattr(raysfl.engine.cluster, "ensure_ray", no_ray)

    sweep = _write(tmp_path, GOOD)
    missing = tmp_path / "no-such-sweep"
    assert main(["sweep", str(sweep), "--resume", "--out", str(missing)]) == 2
    assert f"--resume: {missing} does not exist; name the sweep's output directory" in capsys.readouterr().err
    assert not missing.exists()
    used = tmp_path / "used"
    used.mkdir()
    (used / SWEEP_STATUS).write_text("{}")
    assert main(["sweep", str(sweep), "--out", str(used)]) == 2
    assert f"{used} already holds a sweep" in capsys.readouterr().err
    # a new sweep into a folder holding one of its trials' folders (it took a run there as the trial's, or
    # deleted the folder with the user's files in it); a file as --out
    mine = tmp_path / "mine"
    (mine / "gas_seed2_lr0.05").mkdir(parents=True)
    (mine / "gas_seed2_lr0.05" / "notes.txt").write_text("the user's")
    (mine / "unrelated").mkdir()
    assert main(["sweep", str(sweep), "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine} already holds folders named as this sweep's trials (gas_seed2_lr0.05)" in err
    assert (mine / "gas_seed2_lr0.05" / "notes.txt").read_text() == "the user's"
    afile = tmp_path / "afile"
    afile.write_text("x")
    for resume in ([], ["--resume"]):
        assert main(["sweep", str(sweep), "--out", str(afile), *resume]) == 2
        assert f"--out {afile} is a file, not a directory" in capsys.readouterr().err


def test_a_finished_run_of_another_scenario_is_no_finished_trial(tmp_path):
    """A trial folder whose finished run is of another scenario (another train.local_iterations) was
    counted finished: never run, 'finished' in sweep.json, exit 0. Run again, the trial names the
    difference."""
    import json

    from raysfl.config import dumps_toml
    from raysfl.engine.runner import _finite
    from raysfl.scenario import scenario_to_dict
    from raysfl.sweep.execute import trials_to_run

    trials = load_sweep(_write(tmp_path, GOOD)).trials[:2]
    planned = {t.name: _finite(scenario_to_dict(t.scenario)) for t in trials}
    out = tmp_path / "out"
    for trial in trials:
        doc = json.loads(json.dumps(planned[trial.name]))
        if trial is trials[1]:
            doc["train"]["local_iterations"] = 4
        (out / trial.name).mkdir(parents=True)
        (out / trial.name / "config.toml").write_text(dumps_toml(doc))
        (out / trial.name / "summary.json").write_text(json.dumps({"interrupted": False}))
    names = [t.name for t in trials]
    assert trials_to_run(names, out, resume=True, planned=planned) == [trials[1].name]


def test_resume_refuses_a_sweep_file_that_changed_an_option_a_report_groups_by(tmp_path):
    """The checkpoint fingerprint leaves out engine options a resumed run may change; a sweep's trial is also
    its clock, memory format and threads (a report splits runs by them). --resume accepted a sweep file that
    changed engine.clock: half the trials ran on each clock, and sweep.json recorded the new one for all."""
    import json

    from raysfl.engine.checkpoint import fingerprint
    from raysfl.engine.runner import _finite
    from raysfl.scenario import scenario_to_dict
    from raysfl.sweep.execute import _same_trial

    trial = load_sweep(_write(tmp_path, GOOD)).trials[0]
    doc = _finite(scenario_to_dict(trial.scenario))
    recorded = {"scenario": doc, "fingerprint": fingerprint(doc)}
    for key, value in (("clock", "realtime"), ("memory_format", "channels_last"), ("torch_threads", 2)):
        changed = json.loads(json.dumps(doc))
        changed["engine"][key] = value
        assert fingerprint(changed) == fingerprint(doc)  # what the checkpoint check compares
        assert not _same_trial(recorded, {"scenario": changed, "fingerprint": fingerprint(changed)}, tmp_path)
    moved = json.loads(json.dumps(doc))
    moved["engine"]["pools"] = 3  # the same numbers on any number of pools
    assert _same_trial(recorded, {"scenario": moved, "fingerprint": fingerprint(moved)}, tmp_path)


def test_an_axis_or_a_setting_that_another_axis_overrides_is_a_problem(tmp_path):
    """A [grid] key inside a table a later [link] axis replaces gave trials of other names and the same
    scenario; a [set] key an axis sweeps was listed as set on every trial and set on none."""
    link = (
        '[link.method]\nlabel = ["qs4", "qs2"]\n"algorithm.name" = ["gas", "gas"]\n'
        '"algorithm.params" = [{ q_s = 4, q_c = 4 }, { q_s = 2, q_c = 4 }]\n'
    )
    grid = '[grid]\nseed = [1, 2, 3]\n"algorithm.params.q_c" = [2, 8]\n'
    base = 'base = "scen/tiny.toml"\n'
    with pytest.raises(ConfigError) as err:
        load_sweep(_write(tmp_path, base + grid + link, "a.toml"))  # the grid first: the link replaces q_c
    assert (
        "key 'algorithm.params' replaces the whole table, so the values axis algorithm.params.q_c gives"
        in (str(err.value))
    )
    with pytest.raises(ConfigError) as err:
        load_sweep(_write(tmp_path, base + "[set]\nseed = 5\n" + link + grid, "b.toml"))
    assert "set.seed: also swept ('seed' by axis seed)" in str(err.value)
    # the table first, then a key inside it: the key is applied after the table, as meant
    sweep = load_sweep(_write(tmp_path, base + link + grid, "c.toml"))
    assert sorted(
        {(t.scenario.algorithm.params["q_s"], t.scenario.algorithm.params["q_c"]) for t in sweep.trials}
    ) == [(2, 2), (2, 8), (4, 2), (4, 8)]


@pytest.mark.parametrize("label", ["_tune", "report"])
def test_a_trial_may_not_take_the_name_of_the_sweeps_own_folders(tmp_path, label):
    sweep = GOOD.replace("[link.method]", f'[link.method]\nlabel = ["{label}", "b"]').replace(
        '[grid]\nseed = [1, 2, 3]\n"train.lr" = [0.01, 0.05]\n', ""
    )
    with pytest.raises(
        ConfigError, match=f"{label}: a trial's name may not start with '_' or '.' or be 'report'"
    ):
        load_sweep(_write(tmp_path, sweep))


def test_a_failed_trial_keeps_its_whole_message_and_the_terminal_shows_its_first_line(tmp_path, capsys):
    from raysfl.sweep.execute import _root_cause

    class DataMissingError(Exception):
        pass

    class TaskError(Exception):  # Ray's RayTaskError chains the worker's exception as .cause
        def __init__(self, cause: BaseException) -> None:
            super().__init__("ray::trial() failed\n  traceback ...")
            self.cause = cause

    cause = DataMissingError("MNIST: no readable copy found. Looked in:\n  /a/mnist\n  /b/mnist\n")
    recorded = _root_cause(TaskError(cause))
    assert recorded == "DataMissingError: MNIST: no readable copy found. Looked in:\n  /a/mnist\n  /b/mnist"
    result = SweepResult(tmp_path, finished=[], failed={"mnist": recorded}, unfinished=[])
    assert print_outcome(result, SweepCommand("s.toml")) == 1
    err = capsys.readouterr().err
    assert (
        "sweep: trial mnist failed: DataMissingError: MNIST: no readable copy found. Looked in: "
        "[2 more lines in sweep.json]" in err
    )


def test_a_sweep_without_a_name_is_named_after_its_file_less_the_suffix(tmp_path):
    text = GOOD.replace('base = "scen/tiny.toml"', 'base = "scen/tiny.toml"\nname = "x"')
    assert load_sweep(_write(tmp_path, GOOD, "budgets.sweep.toml")).name == "budgets"
    assert load_sweep(_write(tmp_path, GOOD, "plain.toml")).name == "plain"
    assert load_sweep(_write(tmp_path, text, "named.sweep.toml")).name == "x"


def test_a_scenario_given_as_a_sweep_file_is_said_to_be_one(tmp_path, capsys):
    from raysfl.cli import main

    _write(tmp_path, GOOD)
    scenario = tmp_path / "scen" / "tiny.toml"
    assert main(["sweep", str(scenario), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"raysfl: invalid sweep file {scenario}:")
    assert f"{scenario} is a scenario, not a sweep file: run it with `raysfl run {scenario}`" in err


@pytest.mark.parametrize(
    ("axes", "problem"),
    [
        (
            '[link.method]\nlabel = ["a", "a"]\n"algorithm.name" = ["gas", "fedavg"]\n',
            "link.method.label: 'a' names two points; give each point a label of its own",
        ),
        (
            '[link.method]\n"algorithm.params" = [{ q_s = 4 }, { q_s = 5 }]\n',
            "link.method: two points are named alike ('params', from algorithm.params); give the axis",
        ),
        (
            '[grid]\n"algorithm.params" = [{ q_s = 4 }, { q_s = 5 }]\n',
            "grid.'algorithm.params': two of its values give a trial the same name part 'params' (a table",
        ),
        (
            '[link.method]\nlabel = ["", ".."]\n"algorithm.name" = ["gas", "fedavg"]\n',
            "link.method.label: '' and '..' name trials 'x' alike (a trial's name keeps letters, digits and",
        ),
        (  # no axis repeats a part, but "x" + "y_z" and "x_y" + "z" both make x_y_z
            '[link.a]\nlabel = ["x", "x_y"]\n"train.lr" = [0.1, 0.2]\n'
            '[link.b]\nlabel = ["y_z", "z"]\n"train.momentum" = [0.5, 0.9]\n',
            "several trials get the same name (x_y_z): the name parts of link.a, link.b, joined with '_',",
        ),
    ],
    ids=[
        "repeated-label",
        "link-without-labels",
        "grid-of-tables",
        "labels-alike-once-cleaned",
        "parts-run-together",
    ],
)
def test_repeated_trial_names_say_which_axis_and_what_to_do(tmp_path, axes, problem):
    """The message asked every sweep for link labels, even one whose labels repeat or whose axis is [grid]."""
    problems = _problems(tmp_path, f'base = "scen/tiny.toml"\n{axes}')
    assert any(p.startswith(problem) for p in problems), problems


def test_tunes_own_restore_advice_and_metrics_warnings_are_not_shown(caplog, monkeypatch):
    """On ^C Tune logged "Resume experiment with: Tuner.restore(...)", which a sweep must not use (it starts
    pending trials in another order), and "Failed to fetch metrics" for every trial that never started;
    raysfl's own lines say `raysfl sweep ... --resume` and name the unfinished trials."""
    import logging

    import ray.tune.analysis.experiment_analysis
    import ray.tune.tune

    from raysfl.sweep import execute

    tune_log = logging.getLogger("ray.tune.tune")
    analysis_log = logging.getLogger("ray.tune.analysis.experiment_analysis")
    # importing Ray stops its loggers' records at "ray" (propagate = False), before caplog's handler on the
    # root logger; whether it still does depends on which tests ran before in the same process
    monkeypatch.setattr(logging.getLogger("ray"), "propagate", True)
    message = "Experiment has been interrupted, but the most recent state was saved.\nResume experiment with:"
    with caplog.at_level(logging.WARNING), execute.tune_noise_filtered():
        tune_log.warning(message + ' Tuner.restore(path="/x/_tune", trainable=...)')
        tune_log.warning("Trials did not complete: [a]")
        analysis_log.warning("Failed to fetch metrics for 2 trial(s):\n- a: FileNotFoundError()")
    assert [r.getMessage() for r in caplog.records] == ["Trials did not complete: [a]"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        analysis_log.warning("Failed to fetch metrics for 2 trial(s)")  # outside a sweep: kept
    assert len(caplog.records) == 1
    # the loggers the lines come from
    assert ray.tune.tune.logger is tune_log
    assert ray.tune.analysis.experiment_analysis.logger is analysis_log


def test_a_sweep_files_own_problems_are_said_as_the_sweep_files(tmp_path):
    """A syntax error or a missing file was said as a scenario's; ``base = 3`` as a missing base."""
    (tmp_path / "bad.sweep.toml").write_text('base = "x.toml"\n[grid\n')
    with pytest.raises(ConfigError) as err:
        load_sweep(tmp_path / "bad.sweep.toml")
    assert err.value.report().startswith(
        f"invalid sweep file {tmp_path / 'bad.sweep.toml'}:\n  - malformed TOML"
    )
    with pytest.raises(ConfigError) as err:
        load_sweep(tmp_path / "none.sweep.toml")
    assert err.value.problems == [f"sweep file {tmp_path / 'none.sweep.toml'} not found"]
    problems = _problems(tmp_path, "base = 3\n[grid]\nseed = [1]\n")
    assert problems[0].startswith("base: 3 is not a path; give the base scenario's path as a string")


def test_a_local_sweep_whose_data_this_machine_cannot_reach_is_refused_before_ray_starts(
    tmp_path, capsys, monkeypatch
):
    """Every trial had failed inside Ray Tune with a traceback of its own; now nothing runs or is written."""
    import dataclasses

    from raysfl.data import DATASETS

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAYSFL_DATA", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    hidden = dataclasses.replace(DATASETS["fashion-mnist"], system_dirs=(str(tmp_path / "none"),))
    monkeypatch.setitem(DATASETS, "fashion-mnist", hidden)  # CI has Debian's copy installed
    offline = '[set]\n"data.download" = false\n"data.partition" = "iid"\n'
    text = GOOD.replace("[set]\n", offline) + '"data.dataset" = ["synthetic", "fashion-mnist"]\n'  # in [grid]
    path = _write(tmp_path, text)
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    code = main(["sweep", str(path), "--out", str(out), "--data-dir", str(tmp_path / "empty")])
    err = capsys.readouterr().err
    assert code == 2
    assert "Fashion-MNIST (fashion-mnist): no readable copy found" in err and "Traceback" not in err
    assert "disabled (data.download = false)" in err and str(tmp_path / "empty") in err
    assert not out.exists()


def test_seeds_replace_the_files_seed_axis_in_place(tmp_path):
    """``--seeds``: more seeds of a sweep without a copy of its file; the trials keep the file's order."""
    path = _write(tmp_path, GOOD)
    sweep = load_sweep(path, seeds=[7, 8])
    names = [t.name for t in sweep.trials]
    assert len(names) == 2 * 2 * 2
    assert names[:3] == ["gas_seed7_lr0.01", "gas_seed7_lr0.05", "gas_seed8_lr0.01"]
    assert {t.scenario.seed for t in sweep.trials} == {7, 8}
    assert [t.name for t in load_sweep(path).trials][0] == "gas_seed1_lr0.01"  # the file is unchanged


def test_seeds_are_added_as_a_last_axis_when_the_file_has_none(tmp_path):
    no_grid = GOOD.split("[grid]")[0]
    names = [t.name for t in load_sweep(_write(tmp_path, no_grid), seeds=[4, 5]).trials]
    assert names == ["gas_seed4", "gas_seed5", "fedavg_seed4", "fedavg_seed5"]
    lr_only = GOOD.replace("seed = [1, 2, 3]\n", "")
    names = [t.name for t in load_sweep(_write(tmp_path, lr_only, "lr.toml"), seeds=[4]).trials]
    assert names[:2] == ["gas_lr0.01_seed4", "gas_lr0.05_seed4"]


def test_seeds_that_cannot_replace_the_files_seed_are_refused_naming_the_flag(tmp_path, capsys):
    fixed = GOOD.replace("[set]\n", "[set]\nseed = 3\n").replace("seed = [1, 2, 3]\n", "")
    no_seed = GOOD.replace("seed = [1, 2, 3]\n", "")
    linked = no_seed.replace("[link.method]\n", "[link.method]\nseed = [1, 2]\n")
    cases = [(fixed, [1], "set.seed fixes every trial's seed"), (linked, [1], "link.method sets the seed")]
    cases += [(GOOD, [], "give at least one seed"), (GOOD, [-1], "seeds are integers >= 0")]
    for i, (text, seeds, message) in enumerate(cases):
        with pytest.raises(ConfigError, match="--seeds: ") as err:
            load_sweep(_write(tmp_path, text, f"bad{i}.toml"), seeds=seeds)
        assert message in str(err.value)
    with pytest.raises(SystemExit) as exit_info:  # argparse's usage error
        main(["sweep", str(_write(tmp_path, GOOD)), "--dry-run", "--seeds", "1,x"])
    assert exit_info.value.code == 2
    assert "--seeds: '1,x' is not a comma-separated list of integer seeds" in capsys.readouterr().err


def test_seeds_reach_the_dry_run_and_the_resume_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("raysfl.sweep.execute.local_resources", lambda: {"CPU": 2.0, "GPU": 0.0})
    path = _write(tmp_path, GOOD)
    assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "o"), "--seeds", "11,12"]) == 0
    text = capsys.readouterr().out
    assert "8 trials of tiny.toml" in text and "gas_seed11_lr0.01" in text and "seed1_" not in text
    unfinished = SweepResult(tmp_path / "o", finished=[], failed={}, unfinished=["gas_seed11_lr0.01"])
    assert print_outcome(unfinished, SweepCommand("s.toml", 1.0, seeds=[11, 12])) == 130
    assert f"--out {tmp_path / 'o'} --resume --seeds 11,12 --trial-cpus 1`" in capsys.readouterr().err


def test_a_resume_without_the_seeds_it_started_with_is_refused_saying_so(tmp_path):
    """A sweep recorded with ``--seeds 7,8`` plans other trials than the bare file: refused, naming it."""
    import json

    from raysfl.report.runs import SWEEP_STATUS
    from raysfl.sweep.execute import SweepStateError, _plan_doc, plan, resume_plan

    path = _write(tmp_path, GOOD)
    with_seeds = load_sweep(path, seeds=[7, 8])
    out = tmp_path / "out"
    out.mkdir()
    (out / SWEEP_STATUS).write_text(json.dumps(_plan_doc(with_seeds, plan(with_seeds, {"CPU": 2.0}))))
    assert len(resume_plan(load_sweep(path, seeds=[7, 8]), out)) == 8  # the same seeds: every trial to run
    with pytest.raises(SweepStateError, match=r"Resume with the sweep file \(and --seeds\) it was started"):
        resume_plan(load_sweep(path), out)
