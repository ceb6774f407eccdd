"""raysfl's types reach a method author's type checker.

The package, its actor shells and the example method type-check under pyproject's ``[tool.mypy]``; code
written against :mod:`raysfl.api` the way docs/writing-a-method.md writes it checks clean (a policy's own
``Event.data`` keys and ``Log`` columns included); and a wrong use of the API is caught, so the check reads
real types rather than ``Any``. raysfl ships ``py.typed`` (tests/unit/test_packaging.py), so the same types
reach a checker that reads an installed raysfl.
"""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

AUTHORS_CODE = textwrap.dedent(
    '''
    """What a policy writes: its own event keys, its own log columns, the coordinator's keys."""
    from raysfl.api import SERVER, Action, Call, Event, EventData, Log, LogRow, Schedule, ServerLogic, Slot


    class Policy:
        def on_event(self, ev: Event) -> list[Action]:
            b = int(ev.data["b"])  # a key of the policy's own
            value = ev.data.get("value")  # the coordinator's key for a fetched slot
            row = LogRow(t=ev.t, kind="arrival", client=ev.client)
            row["version"] = 3
            slot = Slot(("eval", b))
            return [
                Call(SERVER, ServerLogic.evaluate, out=slot),
                Schedule(ev.t + 1.0, "arrival", ev.client, {"awaits": slot.name, "b": b, "v": value}),
                Schedule(ev.t + 2.0, "fetch", ev.client, EventData(fetch=slot.name)),
                Log(row),
                Log({"t": ev.t, "kind": "mine", "client": ev.client, "my_column": 0.5}),
            ]
    '''
)

# Each line marked "# wrong" must be reported; nothing else may be.
WRONG_CODE = textwrap.dedent(
    """
    from raysfl.api import SERVER, Call, Event, LogRow, RunSetup, Schedule, ServerLogic, Slot, SplitModel

    Call(SERVER, ServerLogic.evaluate, out="eval")  # wrong: out is a Slot
    Schedule("soon", "arrival")  # wrong: t is a float
    LogRow(t=0.0, kind="start", client="seven")  # wrong: client is an int
    Slot(("eval", 1)).value  # wrong: a Slot has a name only
    Event(0.0, "arrival").client.upper()  # wrong: client is an int


    def build(setup: RunSetup, model: SplitModel) -> None:
        setup.scenario.train.lrr  # wrong: the scenario is typed, and [train] has no lrr
        setup.scenario.federation.active_clients + 1
        model.clinet  # wrong: a SplitModel has client and server
        model.full()
    """
)


@pytest.mark.slow
def test_the_package_and_a_method_authors_code_type_check_and_a_wrong_use_is_caught(tmp_path):
    good, wrong = tmp_path / "authors_policy.py", tmp_path / "wrong_use.py"
    good.write_text(AUTHORS_CODE)
    wrong.write_text(WRONG_CODE)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"]
        + ["raysfl", "actors", "examples", str(good), str(wrong)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    flagged = {int(m.group(1)) for e in errors if (m := re.match(rf"{re.escape(str(wrong))}:(\d+):", e))}
    expected = {n for n, line in enumerate(WRONG_CODE.splitlines(), start=1) if "# wrong" in line}
    elsewhere = [e for e in errors if not e.startswith(str(wrong))]
    assert not elsewhere, "\n".join(elsewhere)
    assert flagged == expected, out.stdout + out.stderr
