"""What a new user can get wrong: unsafe names, used run directories, odd files, non-finite numbers.

Each mistake exits with status 2 and one paragraph naming the field or the file and the fix, never a
traceback, and writes nothing (issue 18). The runs here use ``--backend local`` and a tiny synthetic set.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

from raysfl.cli import build_parser, main
from raysfl.config import MAX_FILE_BYTES, ConfigError, read_toml
from raysfl.scenario import load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "scenarios" / "default.toml")
TINY = """\
name = "{name}"
[data]
dataset = "synthetic"
partition = "iid"
synthetic_train = 200
synthetic_test = 100
[model]
name = "lenet5"
[federation]
num_clients = 4
active_clients = 2
[train]
global_iterations = {iterations}
local_iterations = 1
batch_size = 16
[metrics]
progress = false
"""


def _scenario(path: Path, name: str = "tiny", iterations: int = 1) -> Path:
    path.write_text(TINY.format(name=name, iterations=iterations))
    return path


def _problems(data: dict, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(data, overrides)
    return err.value.problems


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(["run", *argv, "--backend", "local"])
    return code, capsys.readouterr().err


# --- scenario names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["/tmp/x", "../../x", "..", ".", "a/b", "a\x00b", "", ".hidden", "a b", "x" * 129]
)
def test_unsafe_scenario_names_are_refused_naming_the_field(name):
    (problem,) = _problems({"name": name})
    assert problem.startswith("name: ")
    if len(name) < 100 and "\x00" not in name:
        assert "letters, digits, '.', '_' or '-'" in problem


@pytest.mark.parametrize("name", ["tiny", "gas_fmnist-k20.s2", "_x", "A" * 128])
def test_safe_scenario_names_pass(name):
    assert scenario_from_dict({"name": name}).name == name


def test_a_file_without_name_is_named_after_its_file_made_safe(tmp_path):
    path = tmp_path / "my run (v2).toml"
    path.write_text("seed = 3\n")
    assert load_scenario(path).name == "my_run_v2_"


def test_set_with_a_path_as_name_writes_nothing_outside_out(capsys, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "config.toml").write_text("mine = 1\n")
    sdir = tmp_path / "set"
    sdir.mkdir()
    _scenario(sdir / "a.toml", name="a")
    _scenario(sdir / "b.toml", name=str(victim))
    code, err = _run(capsys, str(sdir), "--out", str(tmp_path / "out"))
    assert code == 2 and "name: " in err and "Traceback" not in err
    assert (victim / "config.toml").read_text() == "mine = 1\n"
    assert not (tmp_path / "out").exists()


def test_set_with_two_scenarios_of_one_name_is_refused_before_running_any(capsys, tmp_path):
    sdir = tmp_path / "set"
    sdir.mkdir()
    _scenario(sdir / "a.toml", name="same")
    _scenario(sdir / "b.toml", name="same")
    code, err = _run(capsys, str(sdir), "--out", str(tmp_path / "out"))
    assert code == 2 and "share a name" in err and "a.toml" in err and "b.toml" in err
    assert not (tmp_path / "out").exists()


# --- used, odd and unwritable run directories ------------------------------------------------------------


def test_a_finished_run_is_not_overwritten_unless_asked(capsys, tmp_path):
    scenario = _scenario(tmp_path / "s.toml")
    out = tmp_path / "run"
    assert _run(capsys, str(scenario), "--out", str(out))[0] == 0
    before = (out / "summary.json").read_text()
    code, err = _run(capsys, str(scenario), "--out", str(out), "train.global_iterations=2")
    assert code == 2 and "already holds a finished run" in err and "--overwrite" in err
    assert (out / "summary.json").read_text() == before  # nothing changed
    (out / "notes.txt").write_text("keep me")
    code, err = _run(capsys, str(scenario), "--out", str(out), "--overwrite", "train.global_iterations=2")
    assert code == 0, err
    assert json.loads((out / "summary.json").read_text())["global_iterations"] == 2
    assert len(list((out / "tb").iterdir())) == 1  # TensorBoard sees one run, not two
    assert (out / "notes.txt").read_text() == "keep me"  # only a run's own outputs are deleted


class _CtrlCAt:
    """A sink that stops the run as ^C does when evaluation ``iteration`` arrives."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def on_event(self, row) -> None:
        pass

    def on_eval(self, row) -> None:
        if row["iteration"] == self.iteration:
            raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_a_run_interrupted_before_its_first_checkpoint_says_so_and_how_to_start_over(capsys, tmp_path):
    """It was called "a finished run", and --resume said checkpoints need engine.checkpoint_every > 0,
    which the run had set."""
    from raysfl.engine import runner

    scenario = _scenario(tmp_path / "s.toml", iterations=6)
    out = tmp_path / "run"
    sc = load_scenario(scenario, ["engine.checkpoint_every=4"])
    summary = runner.run(sc, out, backend="local", extra_sinks=[_CtrlCAt(2)])
    assert summary["interrupted"] and summary["global_iterations"] == 2
    code, err = _run(capsys, str(scenario), "--out", str(out), "engine.checkpoint_every=4")
    assert (
        code == 2 and "already holds an interrupted run without checkpoints" in err and "--overwrite" in err
    )
    code, err = _run(capsys, "--resume", str(out))
    assert code == 2
    assert "it stopped before its first one (engine.checkpoint_every = 4: the first is written after " in err
    assert f"`raysfl run SCENARIO --out {out} --overwrite`" in err
    code, err = _run(capsys, str(scenario), "--out", str(out), "engine.checkpoint_every=10", "--overwrite")
    assert code == 0, err
    # finished (6 iterations) before its first checkpoint was due: not "stopped before" it
    code, err = _run(capsys, "--resume", str(out))
    assert code == 2 and "it finished (budget reached); there is nothing to resume, outputs unchanged" in err


def test_a_run_stopped_while_it_is_set_up_leaves_its_folder_free(tmp_path, monkeypatch):
    """^C before the first evaluation (as the Ray actors start) left config.toml behind: the folder was
    refused as used, and --resume had nothing to continue."""
    from raysfl.engine import runner

    def interrupted(prep, server_device=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "local_dispatcher", interrupted)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        runner.run(load_scenario(_scenario(tmp_path / "s.toml")), out, backend="local")
    assert out.is_dir() and not any(out.iterdir())


def test_two_runs_in_one_second_without_out_get_two_folders(tmp_path, monkeypatch):
    from datetime import datetime

    import raysfl.engine.runner as runner
    from raysfl.engine.runner import default_out_dir

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 2, 3, 4, 5)

    monkeypatch.setattr(runner, "datetime", Frozen)
    monkeypatch.chdir(tmp_path)
    sc = scenario_from_dict({"name": "same"})
    first = default_out_dir(sc)
    first.mkdir(parents=True)
    second = default_out_dir(sc)
    assert first.name == "same-20260102-030405" and second.name == "same-20260102-030405-2"


def test_overwrite_starts_a_checkpointed_run_over_and_excludes_resume(capsys, tmp_path):
    from raysfl.engine.checkpoint import CheckpointError
    from raysfl.engine.runner import run

    scenario = _scenario(tmp_path / "s.toml", iterations=2)
    out = tmp_path / "run"
    sc = load_scenario(scenario, ["engine.checkpoint_every=1"])
    run(sc, out, backend="local")
    assert list((out / "checkpoints").glob("ckpt-*.pt"))
    with pytest.raises(CheckpointError, match="already holds a resumable run.*--overwrite"):
        run(sc, out, backend="local")
    run(load_scenario(scenario), out, backend="local", overwrite=True)
    assert not (out / "checkpoints").exists()
    with pytest.raises(ValueError, match="exclude each other"):
        run(sc, out, backend="local", resume=True, overwrite=True)
    code, err = _run(capsys, "--resume", str(out), "--overwrite")
    assert code == 2 and "give one of them" in err


def test_out_naming_a_file_is_a_clear_error(capsys, tmp_path):
    scenario = _scenario(tmp_path / "s.toml")
    target = tmp_path / "taken"
    target.write_text("x")
    code, err = _run(capsys, str(scenario), "--out", str(target))
    assert code == 2 and "is a file, not a directory" in err and "Traceback" not in err
    code, err = _run(capsys, str(scenario), "--out", str(target / "sub"))
    assert code == 2 and "is a file" in err and "Traceback" not in err
    assert target.read_text() == "x"


def test_out_on_a_read_only_file_system_is_a_clear_error(capsys, tmp_path, monkeypatch):
    scenario = _scenario(tmp_path / "s.toml")

    class ReadOnly:
        f_flag = os.ST_RDONLY

    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if mode & os.W_OK else real_access(p, mode))
    monkeypatch.setattr(os, "statvfs", lambda p: ReadOnly())
    code, err = _run(capsys, str(scenario), "--out", str(tmp_path / "ro" / "run"))
    assert code == 2 and "read-only file system" in err and "Traceback" not in err
    assert not (tmp_path / "ro").exists()


def test_a_failing_mkdir_is_a_clear_error(capsys, tmp_path, monkeypatch):
    scenario = _scenario(tmp_path / "s.toml")

    def refuse(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    code, err = _run(capsys, str(scenario), "--out", str(tmp_path / "run"))
    assert code == 2 and "cannot create the run directory" in err and "Read-only file system" in err
    assert "Traceback" not in err


# --- files that are not scenarios -------------------------------------------------------------------------


def test_binary_and_huge_files_are_refused_without_reading_them_whole(tmp_path, capsys):
    binary = tmp_path / "model.toml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" + bytes(range(256)))
    with pytest.raises(ConfigError, match="is not a UTF-8 text file"):
        read_toml(binary)
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * MAX_FILE_BYTES + "\n")
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        read_toml(big)
    with pytest.raises(ConfigError, match="cannot read"):
        read_toml(tmp_path)
    for argv in (["validate", str(binary)], ["validate", "/dev/zero"], ["run", "/dev/zero"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("UTF-8" in err or "1 MiB" in err or "not a regular file" in err)


def test_an_empty_scenario_file_is_refused_with_what_it_would_have_run(tmp_path, capsys):
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing yet\n")
    assert main(["validate", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "sets no key" in err and "T = 1000" in err and 'name = "..."' in err
    named = tmp_path / "named.toml"
    named.write_text('name = "all-defaults"\n')
    assert load_scenario(named).train.global_iterations == 1000


# --- values -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_non_finite_numbers_are_refused_naming_the_field(value):
    (problem,) = _problems({}, (f"train.lr={value}",))
    assert problem.startswith("train.lr: ") and "finite" in problem


def test_a_non_finite_default_may_be_restated_but_not_changed():
    sc = scenario_from_dict({"system": {"link": {"tx_power_dbm": float("-inf")}}})
    assert sc.system.link.tx_power_dbm == float("-inf")
    (problem,) = _problems({"system": {"link": {"tx_power_dbm": float("inf")}}})
    assert problem.startswith("system.link.tx_power_dbm: inf is not allowed") and "-inf" in problem


def test_huge_strings_and_control_characters_are_refused_naming_the_field():
    huge = "x" * (50 << 20)
    problems = _problems({"description": huge, "reference": {"note": huge}, "data": {"data_dir": "a\x00b"}})
    assert any(p.startswith("description: a string of 52,428,800 characters is too long") for p in problems)
    assert any(p.startswith("reference.note: a string of") for p in problems)
    assert "data.data_dir: contains the control character U+0000; remove it" in problems
    assert all(len(p) < 200 for p in problems)  # the value itself is never echoed


def test_algorithm_params_problems_are_listed_with_the_others():
    problems = _problems({"seed": -1, "train": {"lr": "fast"}, "algorithm": {"params": {"q_s": 0}}})
    assert "seed: -1 is out of range; it must be >= 0" in problems
    assert "train.lr: expected a number, got 'fast'" in problems
    assert "algorithm.params.q_s: 0 is out of range; it must be >= 1" in problems


# --- the command line ---------------------------------------------------------------------------------------


def test_overrides_may_follow_options(capsys):
    args = build_parser().parse_args(["run", "a.toml", "--out", "d", "train.lr=0.1", "--backend", "local"])
    assert args.targets == ["a.toml", "train.lr=0.1"] and args.out == "d"
    assert main(["validate", DEFAULT, "--print", "train.global_iterations=7"]) == 0
    assert "T=7" in capsys.readouterr().out


def test_an_interrupt_is_exit_130_even_when_imports_were_cut_short(monkeypatch, capsys):
    """^C inside ``import torch`` leaves it half-imported; listing the user errors would then fail."""
    import raysfl.cli as cli

    def half_imported():
        raise RuntimeError("duplicate registrations for aten.linspace.Tensor_Tensor")

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_user_errors", half_imported)
    monkeypatch.setattr(cli, "cmd_list", interrupted)
    assert main(["list"]) == 130
    assert "interrupted" in capsys.readouterr().err


# --- the server's copy of the test set ---------------------------------------------------------------------


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


def test_hosts_own_writable_copies_of_read_only_arrays(tmp_path):
    """Arrays from Ray's object store are read-only; tensors over them make torch warn on every run."""
    import dataclasses

    from raysfl.engine.hosts import ClientHost, ServerHost
    from raysfl.engine.runner import prepare

    prep = prepare(load_scenario(_scenario(tmp_path / "s.toml")))
    ds = prep.dataset
    setup = dataclasses.replace(
        prep.setup,
        label_hist=_read_only(np.asarray(prep.setup.label_hist)),
        client_indices=tuple(_read_only(np.asarray(ix)) for ix in prep.setup.client_indices),
    )
    test_y = _read_only(ds.test_y.astype(np.int64))
    server = ServerHost(setup, _read_only(ds.test_x), test_y, prep.transform)
    y = server._externals["test_y"]
    assert not np.shares_memory(y.numpy(), test_y) and y.numpy().flags.writeable
    client = ClientHost(setup, _read_only(ds.train_x), _read_only(ds.train_y), prep.transform)
    for host in (server, client):
        own = host._externals["setup"]
        assert own.label_hist.flags.writeable and all(ix.flags.writeable for ix in own.client_indices)
    assert ServerHost(prep.setup, ds.test_x, ds.test_y, prep.transform)._externals["setup"] is prep.setup


def test_a_run_refused_while_it_is_set_up_leaves_its_folder_free(tmp_path):
    """A run that fails before its first evaluation (here: the method's policy cannot be built) leaves none
    of a run's outputs behind, so the corrected run may use the same --out without --overwrite."""
    from raysfl.engine import runner
    from tests.faulty_methods import faulty_scenario

    out = tmp_path / "run"
    (out / "notes.txt").parent.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(TypeError, match="make_policy builds object, which lacks"):
        runner.run(faulty_scenario("UNBUILDABLE_POLICY"), out, backend="local")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert runner.run(faulty_scenario("SPEC"), out, backend="local")["global_iterations"] == 12


def test_a_pool_kill_on_the_local_backend_is_refused_naming_the_option(tmp_path, capsys):
    out = tmp_path / "run"
    scenario = str(_scenario(tmp_path / "s.toml"))
    code, err = _run(capsys, scenario, "engine.kill_pool_at_iteration=1", "--out", str(out))
    assert code == 2, err
    assert (
        "engine.kill_pool_at_iteration: kills a Ray pool process; it needs backend 'ray', not 'local'" in err
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        (
            "seed=1e30",
            "seed: 1000000000000000019884624838656 is out of range; it must fit in 64 bits (< 2**63)",
        ),
        ("seed=9223372036854775808", "seed: 9223372036854775808 is out of range; it must fit in 64 bits"),
        (
            "federation.num_clients=1e9",
            "federation.num_clients: 1000000000 is out of range; it must be <= 1e+06",
        ),
        (
            "data.synthetic_train=1e15",
            "data.synthetic_train: 1000000000000000 is out of range; it must be <= 1e+06",
        ),
        ("engine.time_scale=1e-300", "engine.time_scale: 1e-300 is out of range; it must be >= 1e-06"),
    ],
)
def test_sizes_that_could_not_be_allocated_are_refused_naming_the_field(override, problem):
    """The bad-input audit's 1e30 clients (a numpy error deep in the device draw), 1e9 (24 GB, then killed),
    a seed TOML cannot write back, a time scale whose wall-clock deadlines overflow."""
    assert any(problem in p for p in _problems({"data": {"dataset": "synthetic"}}, (override,)))
    assert (
        scenario_from_dict({"data": {"dataset": "synthetic"}}, ("seed=9223372036854775807",)).seed
        == 2**63 - 1
    )


def test_a_toml_date_in_a_free_form_table_is_refused_naming_it():
    """It passed validation and crashed the run writing config.toml (TypeError: cannot write date)."""
    problems = _problems({"data": {"dataset": "synthetic"}}, ("reference={paper=2024-01-01, at=07:30:00}",))
    assert problems == [
        "reference.paper: 2024-01-01 is a TOML date or time; write it as a string in quotes",
        "reference.at: 07:30:00 is a TOML date or time; write it as a string in quotes",
    ]


def test_a_reference_accuracy_must_be_in_percent_as_reports_print_it():
    """Seven shipped scenarios gave 0.778 for 77.8 %, and reports printed a paper accuracy of 0.78 %."""
    synthetic = {"data": {"dataset": "synthetic"}}
    assert scenario_from_dict(synthetic, ("reference.accuracy=77.8",)).reference["accuracy"] == 77.8
    assert _problems(synthetic, ("reference.accuracy=0.778",)) == [
        "reference.accuracy: 0.778 is not an accuracy in percent (a number in (1, 100]); 0.778 reads as a "
        "fraction, so write 77.8"
    ]
    for bad in ("120", "true", "'high'"):
        (problem,) = _problems(synthetic, (f"reference.accuracy={bad}",))
        assert problem.startswith("reference.accuracy: ") and "not an accuracy in percent" in problem


def test_a_scenario_file_with_an_equals_sign_in_its_name_is_run(tmp_path, capsys):
    scenario = tmp_path / "lr=0.1.toml"
    _scenario(scenario, name="eq")
    code, err = _run(capsys, str(scenario), "--out", str(tmp_path / "run"), "train.global_iterations=1")
    assert code == 0, err
    assert (tmp_path / "run" / "summary.json").is_file()


def test_a_resume_missing_only_the_stored_scenario_says_so_and_takes_the_file(capsys, tmp_path):
    """It said the run wrote no checkpoint, beside two of them."""
    scenario = _scenario(tmp_path / "s.toml", iterations=3)
    out = tmp_path / "run"
    assert _run(capsys, str(scenario), "--out", str(out), "engine.checkpoint_every=1")[0] == 0
    (out / "checkpoints" / "scenario.toml").unlink()
    (out / "summary.json").unlink()  # as if killed after its last checkpoint
    code, err = _run(capsys, "--resume", str(out))
    assert code == 2
    assert (
        f"{out / 'checkpoints' / 'scenario.toml'}, the scenario its checkpoints were taken with, is missing"
        in err
    )
    code, err = _run(capsys, str(scenario), "--resume", str(out), "engine.checkpoint_every=1")
    assert code == 0, err


@pytest.mark.parametrize("override", ["=5", "train..lr=0.1", ".seed=3"])
def test_an_override_without_a_dotted_key_is_named(override):
    assert _problems({}, (override,)) == [
        f"override {override!r}: {override.partition('=')[0]!r} is not a dotted key (like train.lr)"
    ]


def test_an_address_with_the_local_backend_is_refused(tmp_path, capsys):
    """It was ignored (--trial-cpus inf, capped silently, is in tests/unit/sweep/test_sweep_spec.py)."""
    code, err = _run(capsys, str(_scenario(tmp_path / "s.toml")), "--address", "127.0.0.1:1")
    assert code == 2
    assert "run: --address 127.0.0.1:1 names a Ray cluster; --backend local runs without Ray" in err


def test_an_empty_scenario_directory_is_named(tmp_path, capsys):
    (tmp_path / "set").mkdir()
    code, err = _run(capsys, str(tmp_path / "set"))
    assert code == 2 and f"scenario directory {str(tmp_path / 'set')!r} holds no scenario" in err


def test_configuration_errors_keep_their_message_across_processes():
    """A sweep trial's ConfigError reaches the driver pickled; it came back as 't\\nr\\na\\ni...' (its
    joined message taken for the list of problems), and so did UnknownAlgorithmError."""
    import pickle

    from raysfl.methods import UnknownAlgorithmError

    err = ConfigError(["train.lr: must be > 0", "seed: not an integer"], source="a.toml", kind="sweep")
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.problems, back.source, back.kind) == (str(err), err.problems, "a.toml", "sweep")
    unknown = UnknownAlgorithmError(["algorithm.name: 'gsa' is not a method; did you mean 'gas'?"])
    again = pickle.loads(pickle.dumps(unknown))
    assert str(again) == str(unknown) and again.problems == unknown.problems
