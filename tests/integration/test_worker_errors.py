"""An exception raised by a method's logic in a Ray worker ends the run, as on the local backend; a policy's
mistake is said in its terms on both.

Calls whose results nobody fetches (a server's ``receive``, a job whose model only feeds it) used to be
waited for, never fetched, so their exceptions vanished and the run went on to a "finished" summary with
wrong numbers. Each call's status is now fetched once it is done.
"""

import re
from pathlib import Path

import pytest

from examples.fedasync_hinge.test_fedasync_hinge import SCENARIO
from raysfl.cli import main
from raysfl.engine import runner
from tests.faulty_methods import LONGER, METHODS, InjectedFaultError, faulty_scenario


@pytest.mark.parametrize(
    ("spec", "extra", "call"),
    [
        ("SERVER_FAILS", [], "the server's call receive"),
        ("EVALUATE_FAILS", [], r"(the server's call evaluate|a report \(iteration=4, t=[0-9.]+\) reads)"),
        ("CLIENT_FAILS", [], "'s call train"),
        ("CLIENT_FAILS", ["engine.pools=2", "engine.placement=least-loaded"], "'s call train"),
    ],
    ids=["server", "evaluate", "client", "roaming-client"],
)
def test_an_exception_in_a_worker_ends_the_run_with_its_type_and_the_call(
    ray_session, tmp_path, spec, extra, call
):
    out = tmp_path / "run"
    with pytest.raises(InjectedFaultError, match="planted") as caught:
        runner.run(faulty_scenario(spec, *extra), out, backend="ray")
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert re.search(call, notes) and "in a Ray worker" in notes
    assert not (out / "summary.json").exists()  # never reported as finished


@pytest.mark.parametrize("spec", ["SERVER_FAILS", "CLIENT_FAILS"])
def test_the_local_backend_raises_the_same_exception(tmp_path, spec):
    with pytest.raises(InjectedFaultError, match="planted"):
        runner.run(faulty_scenario(spec), tmp_path / "run", backend="local")
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_worker_that_cannot_be_built_ends_the_run_at_once_saying_why(ray_session, tmp_path, capsys):
    """A pool whose constructor raised (a client logic that cannot be built; raysfl missing on a node) was
    taken for a lost worker: restarted twice, then 'gave up ... run it again', the cause buried in Ray's
    log, and the folder kept its config.toml, so running it again was refused. Now: no restart, the
    exception named, the folder left free."""
    out = tmp_path / "run"
    argv = ["run", str(SCENARIO), "--out", str(out), *LONGER]
    argv.append(f'algorithm.name="{METHODS}:CLIENT_UNBUILDABLE"')
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "raysfl: a worker of the run could not start: tests.faulty_methods.InjectedFaultError: planted: the "
        "client logic cannot be built (raised building ClientPool on node " in err
    )
    assert "restarting the workers" not in err and "Nothing was retried" in err
    assert not out.exists() or not any(out.iterdir())  # free for the corrected run


def test_the_cli_raises_the_workers_exception_and_writes_no_summary(ray_session, tmp_path, capsys):
    argv = ["run", str(SCENARIO), "--out", str(tmp_path / "run"), *LONGER]
    argv.append(f'algorithm.name="{METHODS}:SERVER_FAILS"')
    with pytest.raises(InjectedFaultError):
        main(argv)
    assert not Path(tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize(
    ("b", "message"),
    [
        (90, r"the policy's start\(\) returned a NoneType; it returns a list of actions"),
        (91, r"the policy's on_event\('arrival' at t = [0-9.e+]+\) returned a Call; it returns a list"),
        (92, r"the policy passed a call slot \('nope', 2\), which no earlier Call produced"),
        (93, r"Call\(CLIENT, send_model\) runs 'send_model' on the client logic HingeClient, which has no"),
        (94, r"on_event\('arrival' at t = [0-9.e+]+\) scheduled event 'arrival' at t = [0-9.e+-]+, before"),
    ],
    ids=["start-returns-none", "on-event-returns-a-call", "unfilled-slot", "wrong-role", "past-event"],
)
@pytest.mark.parametrize("backend", ["local", "ray"])
def test_a_policy_mistake_is_said_in_the_policys_terms(ray_session, tmp_path, backend, b, message):
    from raysfl.engine.policy_errors import PolicyError

    with pytest.raises(PolicyError, match=message):
        runner.run(faulty_scenario("MISTAKES", f"algorithm.params.b={b}"), tmp_path / "run", backend=backend)
