"""A received run or report folder with links planted under raysfl's output names: nothing is written through.

Someone hands over a run folder (a tarball, a shared drive) whose ``summary.json`` is a link to the
receiver's ``~/.bashrc``. ``raysfl run --resume`` and ``raysfl report`` must replace such links with their own
files, never overwrite, truncate or delete what they point to, and refuse a linked folder whose files they
delete.
"""

import os
import shutil
from pathlib import Path

import pytest

from raysfl.cli import main
from raysfl.engine import runner
from raysfl.safe_write import replace_file, replace_text, unlinked
from raysfl.scenario import scenario_from_dict
from tests.unit.engine.test_checkpoint_resume import crash_after, rows, tiny


def _fedavg_with_tensorboard():
    doc = tiny("fedavg")
    doc["metrics"]["tensorboard"] = True
    return scenario_from_dict(doc)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished FedAvg run with checkpoints at iterations 2 and 4, and TensorBoard logs."""
    out = tmp_path_factory.mktemp("linked") / "full"
    runner.run(_fedavg_with_tensorboard(), out, backend="local")
    return out


def _victims(folder: Path, names: list[str]) -> dict[str, bytes]:
    folder.mkdir()
    for name in names:
        (folder / name).write_bytes(f"the receiver's own {name}\n".encode())
    return {name: (folder / name).read_bytes() for name in names}


def test_a_resumed_run_replaces_planted_links_and_leaves_their_targets_alone(finished, tmp_path):
    received = crash_after(finished, tmp_path / "received", "ckpt-000002.pt")
    victim = tmp_path / "home"
    before = _victims(victim, ["bashrc", "notes.parquet", "data.bin", "config"])
    planted = {
        "summary.json": "bashrc",
        "metrics.parquet": "notes.parquet",
        "events.parquet": "data.bin",
        "checkpoints/ckpt-000004.pt": "config",  # the name the resumed run's next checkpoint gets
    }
    for name, target in planted.items():
        (received / name).unlink(missing_ok=True)
        (received / name).symlink_to(victim / target)

    assert main(["run", "--resume", str(received), "--backend", "local"]) == 0

    assert {name: (victim / name).read_bytes() for name in before} == before
    for name in planted:
        assert not (received / name).is_symlink(), name
    assert rows(received / "metrics.parquet") == rows(finished / "metrics.parquet")
    assert rows(received / "events.parquet") == rows(finished / "events.parquet")


def test_a_resume_refuses_a_linked_tensorboard_folder_and_deletes_nothing_in_it(finished, tmp_path, capsys):
    received = crash_after(finished, tmp_path / "received", "ckpt-000002.pt")
    other_logs = tmp_path / "other_project_logs"
    other_logs.mkdir()
    kept = other_logs / "events.out.tfevents.123.host"  # what a resume would delete in the run's tb/
    kept.write_bytes(b"another project's TensorBoard log")
    for f in (received / "tb").iterdir():
        f.unlink()
    (received / "tb").rmdir()
    (received / "tb").symlink_to(other_logs)

    assert main(["run", "--resume", str(received), "--backend", "local"]) == 2
    err = capsys.readouterr().err
    assert f"{received / 'tb'} is a symbolic link (to {other_logs})" in err
    assert "Traceback" not in err
    assert kept.read_bytes() == b"another project's TensorBoard log"
    assert not (received / "summary.json").exists()  # nothing ran


def test_a_report_replaces_a_planted_link_and_refuses_a_linked_report_folder(finished, tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a").symlink_to(finished, target_is_directory=True)
    victim = tmp_path / "home"
    before = _victims(victim, ["bashrc", "profile", "accuracy_emulated_1.png"])
    (runs / "report").mkdir()
    (runs / "report" / "report.md").symlink_to(victim / "bashrc")
    (runs / "report" / "runs.csv").symlink_to(victim / "profile")

    assert main(["report", str(runs)]) == 0
    assert not (runs / "report" / "report.md").is_symlink()
    assert not (runs / "report" / "runs.csv").is_symlink()
    assert "# Report: 1 runs" in (runs / "report" / "report.md").read_text()
    assert {name: (victim / name).read_bytes() for name in before} == before

    linked = tmp_path / "linked_runs"
    linked.mkdir()
    (linked / "a").symlink_to(finished, target_is_directory=True)
    (linked / "report").symlink_to(victim, target_is_directory=True)  # stale figures would be deleted there
    assert main(["report", str(linked)]) == 2
    assert f"{linked / 'report'} is a symbolic link" in capsys.readouterr().err
    assert {name: (victim / name).read_bytes() for name in before} == before


def test_replace_file_swaps_the_link_itself_and_keeps_no_temporary_file(tmp_path):
    target = tmp_path / "target"
    target.write_text("kept")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    replace_text(link, "written")
    assert not link.is_symlink() and link.read_text() == "written" and target.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "target"]

    def fails(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_file(link, fails)
    assert link.read_text() == "written"  # the old file stays whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "target"]


def test_a_replaced_file_gets_the_mode_a_plain_write_gives(tmp_path):
    old = os.umask(0o022)
    try:
        replace_text(tmp_path / "a.txt", "x")
        (tmp_path / "b.txt").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.txt").stat().st_mode


def test_unlinked_removes_only_a_link(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert unlinked(plain).read_text() == "x"
    link = tmp_path / "link"
    link.symlink_to(plain)
    assert not unlinked(link).exists() and plain.read_text() == "x"


def test_a_resume_that_imports_a_methods_module_says_so(tmp_path, capsys):
    """A stored scenario may name a method outside raysfl by its import path; resuming the run imports that
    module, which is code: the user is told which before it happens."""
    name = "examples.fedasync_hinge.method:SPEC"
    full = tmp_path / "full"
    runner.run(scenario_from_dict(tiny(name)), full, backend="local")
    received = crash_after(full, tmp_path / "received", "ckpt-000002.pt")
    assert main(["run", "--resume", str(received), "--backend", "local"]) == 0
    err = capsys.readouterr().err
    assert f"names the method {name}: resuming imports the module examples.fedasync_hinge.method" in err


def test_a_checkpoint_listing_an_event_segment_outside_its_folder_is_refused(finished, tmp_path):
    """A received run's checkpoint names the event log segments the resume joins into events.parquet; one
    naming another file on the machine (../../elsewhere.parquet) would copy that file into the run folder."""
    from raysfl.engine.checkpoint import CheckpointError
    from raysfl.engine.snapshot import load_tree, save_tree

    received = crash_after(finished, tmp_path / "received", "ckpt-000002.pt")
    other = tmp_path / "elsewhere.parquet"
    shutil.copy(received / "checkpoints" / "events-000002.parquet", other)  # a readable Parquet file
    ck = received / "checkpoints" / "ckpt-000002.pt"
    tree = load_tree(ck)
    segments = tree["sinks"]["items"][0][1]["items"]
    segments[:] = ["../elsewhere.parquet"]
    save_tree(tree, ck)
    with pytest.raises(CheckpointError, match=r"lists the event log segment .*elsewhere.parquet, outside"):
        runner.run(_fedavg_with_tensorboard(), received, backend="local", resume=True)
