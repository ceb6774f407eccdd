"""The command line: listings, descriptions, and user errors as one paragraph with exit code 2."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from raysfl.cli import main
from raysfl.data import DATASETS

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "scenarios" / "default.toml")


def test_list_shows_every_registry(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in (
        "scenarios/default.toml",
        "fashion-mnist",
        "cifar10",
        "alexnet",
        "vgg19",
        "gas",
        "system.link.kind",
    ):
        assert word in out
    # the hundreds of scenario files are counted by folder, so the other registries stay on screen
    assert "  scenarios/gas/ " in out and "scenarios/gas/fmnist" not in out
    assert len(out.splitlines()) < 100


def test_list_algorithms_shows_a_method_by_import_path_with_its_options(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example is imported as examples.fedasync_hinge, from the current directory
    assert main(["list", "algorithms", "examples.fedasync_hinge.method:SPEC", "fedasync"]) == 0
    out = capsys.readouterr().out
    assert "fedasync_hinge [fl]" in out and "examples.fedasync_hinge.method:SPEC)" in out
    assert "options ([algorithm.params], HingeParams):" in out
    assert "alpha: float = 0.6 (> 0; <= 1) — mixing weight" in out
    assert "fedasync       [fl]" in out
    assert (
        "staleness_a: float = 0.5 (>= 0; old key a; read only when staleness in ('polynomial', 'hinge')) — "
        in out
    )


def test_describe_method_is_list_algorithms_of_the_names(capsys):
    assert main(["describe", "method", "gas"]) == 0
    described = capsys.readouterr().out
    assert main(["list", "algorithms", "gas"]) == 0
    assert described == capsys.readouterr().out
    assert "la_tau: float = 1.0 (>= 0; read only when logit_adjustment = True)" in described
    assert main(["describe", "method", "gass"]) == 2
    assert (
        "raysfl: describe method: 'gass' is not a known method (did you mean 'gas'?)"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "name, needle",
    [
        ("examples.no_such_module:SPEC", "no module named 'examples.no_such_module'"),
        ("examples.fedasync_hinge.method:NOPE", "has no attribute 'NOPE'"),
        ("raysfl.config:option", "names a function, not a raysfl.api.AlgorithmSpec"),
        ("fedasyncc", "is not a known method (did you mean 'fedasync'?)"),
    ],
)
def test_list_algorithms_with_a_bad_name_exits_2_with_one_line_naming_it(capsys, monkeypatch, name, needle):
    monkeypatch.chdir(ROOT)
    assert main(["list", "algorithms", "fedbuff", name]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing listed: the names are checked first
    (line,) = captured.err.splitlines()
    assert line.startswith(f"raysfl: list algorithms: {name!r}") and needle in line


def test_list_takes_names_only_for_algorithms(capsys):
    assert main(["list", "models", "alexnet"]) == 2
    assert "list models: takes no names" in capsys.readouterr().err


def test_describe_model_shows_the_spec_counts(capsys):
    assert main(["describe", "model", "alexnet", "--split", "L2"]) == 0
    out = capsys.readouterr().out
    assert "19,392" in out and "3,868,746" in out and "11,206,656" in out and "64×8×8" in out
    assert main(["describe", "model", "cse_fsl_cifar10", "--aux", "mlp"]) == 0
    out = capsys.readouterr().out
    assert "107,328" in out and "960,970" in out and "23,050" in out and "3×24×24" in out


def test_describe_devices_prints_the_drawn_table(capsys):
    assert main(["describe", "devices", DEFAULT]) == 0
    out = capsys.readouterr().out
    assert "20 clients" in out and "GFLOP/s" in out and "up Mb/s" in out


def test_shipped_scenarios_are_found_by_the_names_list_prints_from_any_directory(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    assert main(["list", "scenarios"]) == 0
    listed = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert "scenarios/default.toml" in listed
    for name in ("scenarios/default.toml", "default.toml"):
        assert main(["validate", name]) == 0
        assert capsys.readouterr().out.startswith("ok: default: gas on fashion-mnist")
    assert main(["sweep", "scenarios/repro/gas/fmnist_s2.sweep.toml", "--dry-run", "--out", "o"]) == 0
    assert main(["validate", "scenarios/no-such.toml"]) == 2


@pytest.mark.parametrize("argv", [["validate"], ["describe", "devices"]])
def test_a_missing_scenario_is_the_one_argument_named_as_required(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("the following arguments are required: scenario")  # not key=value


def test_validate_ok_and_overrides(capsys):
    assert main(["validate", DEFAULT, "train.global_iterations=3"]) == 0
    assert "T=3" in capsys.readouterr().out


SYNTHETIC = ['data.dataset="synthetic"', "data.synthetic_train=600", 'model.name="lenet5"']
SYNTHETIC += ['model.split="conv1"']


def test_validate_with_data_partitions_and_builds_as_a_run_does(capsys):
    """--data finds what depends on the data: 600 samples cannot give 20 clients 40 each. Without it the
    scenario is valid as written (the run would fail at its start)."""
    impossible = [*SYNTHETIC, 'data.partition="dirichlet"', "data.min_client_size=40"]
    assert main(["validate", DEFAULT, *impossible]) == 0
    capsys.readouterr()
    assert main(["validate", DEFAULT, "--data", *impossible]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no "ok"
    assert captured.err.startswith("raysfl: dirichlet: 600 samples cannot give K=20 clients")
    assert "data.min_client_size=40" in captured.err
    assert main(["validate", DEFAULT, "--data", *SYNTHETIC]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok: default: gas on synthetic (shard)")
    # 600 samples over K = 20 in shards: 30 each; LeNet-5's conv1 activation (pooled): 6×14×14 float32
    assert out[1].startswith("data: 600 train / 500 test samples from synthetic (generated: seed=0")
    assert "samples per client 30–30 (median 30)" in out[1]
    assert out[1].endswith("model lenet5/conv1: 61,706 parameters, activations 4,704 B per sample")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["validate", DEFAULT, "train.lrr=3"], "train.lrr: unknown key (did you mean 'lr'?)"),
        (["validate", DEFAULT, "model.split=L9"], "model.split: 'L9'"),
        (["validate", "no-such.toml"], "scenario file no-such.toml not found"),
        (["describe", "model", "alexnett"], "unknown model 'alexnett'"),
        (["describe", "model", "lenet5", "--crop", "100"], "--crop: 100 is not a crop of the 28×28 images"),
        (["describe", "model", "lenet5", "--crop", "-1"], "--crop: -1 is not a crop of the 28×28 images"),
        (["data", "check", "fashion-mnist", "--data-dir", "/nonexistent-raysfl"], "/nonexistent-raysfl"),
    ],
)
def test_user_errors_exit_2_without_traceback(argv, needle, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAYSFL_DATA", str(tmp_path / "empty"))
    # The host may have Debian's dataset-fashion-mnist installed (CI does): hide that system folder.
    hidden = dataclasses.replace(DATASETS["fashion-mnist"], system_dirs=(str(tmp_path / "none"),))
    monkeypatch.setitem(DATASETS, "fashion-mnist", hidden)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


def test_console_script_exit_code_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = 'x'\n[train]\nlr = -1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "raysfl.cli", "validate", str(bad)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 2
    assert "seed: expected an integer, got 'x'" in proc.stderr
    assert "train.lr: -1.0 is out of range; it must be > 0" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreachable_cluster_address_is_a_clear_error(capsys, tmp_path):
    import socket

    with socket.socket() as s:  # a loopback port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[data]\ndataset = "synthetic"\n[model]\nname = "lenet5"\n[train]\nglobal_iterations = 1\n'
    )
    assert main(["run", str(scenario), "--address", f"127.0.0.1:{port}", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"no Ray cluster at --address 127.0.0.1:{port}" in err and "ray start --head" in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()  # nothing is written when the cluster cannot be reached


@pytest.mark.parametrize("address", ["192.0.2.2", "notahost"])
def test_a_cluster_address_without_a_port_is_a_clear_error(capsys, tmp_path, address):
    """Ray raised a bare ValueError (Invalid address format), a traceback with exit 1."""
    scenario = tmp_path / "s.toml"
    scenario.write_text('[data]\ndataset = "synthetic"\n[model]\nname = "lenet5"\n')
    assert main(["run", str(scenario), "--address", address, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"--address {address}: give the head node's host:port" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "body, needle",
    [
        ("[data\ndataset = ", "malformed TOML"),
        (
            '[data]\ndataset = "synthetic"\nsynthetic_train = 100\n[federation]\nnum_clients = 60\n',
            "shard: class",
        ),
        ('[data]\ndataset = "fashion-mnist"\n', "the file is truncated or corrupt"),
        ('[model]\nname = "lenet5"\nsplit = "conv9"\n', "model.split: 'conv9'"),
        ("[engine]\npoolz = 2\n", "engine.poolz: unknown key (did you mean 'pools'?)"),
        (
            '[data]\ndataset = "cifar100"\npartition = "iid"\n[model]\nname = "resnet20"\n',
            "CIFAR-100 (cifar100): no readable copy",
        ),
        (
            '[data]\ndataset = "tiny-imagenet"\npartition = "iid"\n[model]\nname = "resnet20"\n',
            "(tiny-imagenet): no readable copy",
        ),
    ],
    ids=[
        "malformed-toml",
        "impossible-partition",
        "corrupt-dataset",
        "no-such-split",
        "unknown-key",
        "missing-cifar100",
        "missing-tiny-imagenet",
    ],
)
def test_run_rejects_bad_input_with_exit_2_and_writes_nothing(body, needle, capsys, tmp_path):
    corrupt = tmp_path / "data" / "fashion-mnist"
    corrupt.mkdir(parents=True)
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        (corrupt / name).write_bytes(b"\x00\x00\x08\x03" + b"\x07" * 40)
    scenario = tmp_path / "bad.toml"
    scenario.write_text(body)
    out = tmp_path / "run"
    code = main(
        ["run", str(scenario), "--out", str(out), "--backend", "local", "--data-dir", str(tmp_path / "data")]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert not out.exists()


def test_a_data_dir_that_is_not_a_directory_is_refused(capsys, tmp_path):
    """It was passed over silently for $RAYSFL_DATA and the other usual places."""
    missing = tmp_path / "nope"
    for argv in (["data", "check", "cifar10"], ["run", "scenarios/default.toml"]):
        assert main([*argv, "--data-dir", str(missing)]) == 2
        assert f"--data-dir: {missing} is not a directory" in capsys.readouterr().err


# --- link options, trace files, the server's device: the scenario's paragraph, never a traceback ------------

TINY = """\
name = "tiny"
[data]
dataset = "synthetic"
partition = "iid"
synthetic_train = 64
synthetic_test = 32
[model]
name = "lenet5"
[federation]
num_clients = 4
active_clients = 2
[train]
global_iterations = 1
local_iterations = 1
batch_size = 16
[metrics]
progress = false
"""


@pytest.mark.parametrize(
    "override, needle",
    [
        (
            "system.link.tx_power_dbm=4000",
            "system.link.tx_power_dbm: 4000.0 is out of range; give -100 to 100 dBm",
        ),
        ("system.link.server_tx_power_dbm=4000", "system.link.server_tx_power_dbm: 4000.0 is out of range"),
        ("system.link.noise_dbm_per_hz=174", "system.link.noise_dbm_per_hz: 174.0 is out of range"),
        (
            "system.link.path_loss_b_db=-10",
            "system.link.path_loss_b_db: -10.0 is out of range; it must be >= 0",
        ),
        ("system.link.tx_power_dbm=-100", "system.link.tx_power_dbm: -100 gives client 0 an uplink rate of"),
        (
            "system.link.bandwidth_hz=1e-300",
            "system.link.bandwidth_hz: 1e-300 gives client 0 an uplink rate of inf",
        ),
        (
            "system.link.bandwidth_reduction=1e308",
            "system.link.bandwidth_reduction: 1e+308 gives client 0 an",
        ),
    ],
)
def test_link_options_giving_no_usable_rate_exit_2_under_the_scenario(override, needle, capsys):
    for command in (["describe", "devices"], ["validate"]):
        assert main([*command, DEFAULT, override]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"raysfl: invalid scenario {DEFAULT}:\n  - ") and needle in err, err
        assert "Traceback" not in err and "DeviceTable" not in err


def test_trace_file_problems_exit_2_naming_the_field_under_the_scenario(capsys, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY + '[system]\ntrace_file = "t.csv"\n[system.compute]\nkind = "trace"\n')
    (tmp_path / "t.csv").mkdir()  # a directory where the trace should be
    (tmp_path / "bin.csv").write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    for override, why in [
        ((), f"system.trace_file: {tmp_path / 't.csv'}: is a directory"),
        (
            ("system.trace_file=" + str(tmp_path / "bin.csv"),),
            "not a UTF-8 text file (byte 0x89 at offset 0)",
        ),
        (
            ("system.trace_file=" + str(tmp_path / "gone.csv"),),
            f"{tmp_path / 'gone.csv'}: trace file not found",
        ),
    ]:
        for command in (["validate"], ["describe", "devices"], ["run", "--backend", "local"]):
            out = tmp_path / "run"
            extra = ["--out", str(out)] if command[0] == "run" else []
            assert main([*command, str(scenario), *override, *extra]) == 2
            err = capsys.readouterr().err
            assert (
                err.startswith(f"raysfl: invalid scenario {scenario}:\n  - system.trace_file: ")
                and why in err
            )
            assert "Traceback" not in err and not out.exists()


def test_a_cuda_server_without_a_gpu_exits_2_naming_the_option_and_writes_nothing(
    capsys, tmp_path, monkeypatch
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    out = tmp_path / "run"
    code = main(["run", str(scenario), "--backend", "local", "--out", str(out), "engine.server_device=cuda"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err == (
        f"raysfl: invalid scenario {scenario}:\n  - engine.server_device: 'cuda' needs a GPU, but the "
        "server's process sees none (torch.cuda.is_available() is false); choose 'auto' (the GPU where there "
        "is one, else the CPU) or 'cpu'\n"
    )


def test_the_server_device_error_survives_pickling_and_ray_s_wrapping(monkeypatch):
    """Ray re-raises a worker's exception on the driver as a subclass of its type: still a user error."""
    import pickle

    import torch
    from ray import cloudpickle
    from ray.exceptions import RayTaskError

    from raysfl.config import ConfigError
    from raysfl.engine.hosts import ServerDeviceError, pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ServerDeviceError) as caught:
        pick_device("cuda")
    err = caught.value
    err.add_note("raysfl: raised by the server")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is ServerDeviceError and again.problems == err.problems
    assert again.__notes__ == ["raysfl: raised by the server"]
    wrapped = RayTaskError(
        "Server.__init__", "Traceback (most recent call last): ...", cloudpickle.loads(cloudpickle.dumps(err))
    )
    on_driver = cloudpickle.loads(cloudpickle.dumps(wrapped)).as_instanceof_cause()
    assert isinstance(on_driver, ServerDeviceError) and isinstance(on_driver, ConfigError)
    assert on_driver.report() == "invalid configuration:\n  - " + err.problems[0]  # what the CLI prints
    assert pick_device("cpu") == "cpu" and pick_device("auto") == "cpu"
    with pytest.raises(ServerDeviceError, match="engine.server_device: 'tpu' is not allowed; choose one of"):
        pick_device("tpu")


def test_a_problem_found_while_running_is_listed_under_the_scenario(capsys, tmp_path, monkeypatch):
    from raysfl.config import ConfigError
    from raysfl.engine import runner

    def fails(*args, **kwargs):
        raise ConfigError(["engine.server_device: 'cuda' needs a GPU"])

    monkeypatch.setattr(runner, "run", fails)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    assert main(["run", str(scenario), "--out", str(tmp_path / "run")]) == 2  # the Ray backend, never started
    err = capsys.readouterr().err
    assert err == f"raysfl: invalid scenario {scenario}:\n  - engine.server_device: 'cuda' needs a GPU\n"


def test_raysfl_warnings_print_as_one_line_and_others_as_python_does(capsys):
    """A warning raised in raysfl's code reads as the CLI's messages do; a library's keeps its location."""
    from raysfl import cli

    cli._show_warning(UserWarning("x happened"), UserWarning, str(cli.PACKAGE_DIR / "data" / "load.py"), 7)
    assert capsys.readouterr().err == "raysfl: warning: x happened\n"
    cli._show_warning(UserWarning("y happened"), UserWarning, "/elsewhere/lib.py", 3, line="")
    assert capsys.readouterr().err == "/elsewhere/lib.py:3: UserWarning: y happened\n"
