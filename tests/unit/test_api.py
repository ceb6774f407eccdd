"""The public method API: protocol checks, methods named by import path or entry point, their errors."""

import textwrap
from importlib.metadata import EntryPoint

import pytest

from raysfl import methods as resolve_mod
from raysfl.algorithms import ALGORITHMS
from raysfl.api import SERVER, AlgorithmSpec, Call, ClientLogic, Policy, ServerLogic, check_logic, check_spec
from raysfl.cli import main
from raysfl.config import ConfigError
from raysfl.engine.snapshot import state_classes
from raysfl.scenario import scenario_from_dict

HINGE = "examples.fedasync_hinge.method:SPEC"


def tiny(name: str, **params) -> dict:
    return {
        "name": "api",
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 100, "synthetic_test": 20},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 4, "active_clients": 2},
        "train": {"global_iterations": 2, "local_iterations": 1, "batch_size": 8},
        "algorithm": {"name": name, "params": params},
        "metrics": {"progress": False, "tensorboard": False},
    }


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A folder on sys.path where a test writes its own method modules."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def write_module(folder, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


BROKEN_POLICY = """
    from dataclasses import dataclass
    from examples.fedasync_hinge.method import HingeClient, HingeServer, HingeParams
    from raysfl.api import AlgorithmSpec

    class NoCountPolicy:
        def __init__(self, setup, time, profile, rng):
            pass

        def start(self):
            return []

        def on_event(self, ev):
            return []

    SPEC = AlgorithmSpec(
        name="broken", params=HingeParams, description="", family="fl", source="",
        make_client=HingeClient, make_server=HingeServer, make_policy=NoCountPolicy,
    )
    NOT_A_SPEC = 42
"""


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_registered_spec_satisfies_the_protocols(name):
    assert check_spec(ALGORITHMS[name]) == []


def test_a_spec_missing_a_protocol_member_fails_at_load_time_naming_it(plugin_dir):
    write_module(plugin_dir, "broken_method", BROKEN_POLICY)
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(tiny("broken_method:SPEC"))
    (problem,) = err.value.problems
    assert problem.startswith("algorithm.name: 'broken_method:SPEC': make_policy builds NoCountPolicy")
    assert "lacks global_iteration" in problem and "raysfl.api.Policy" in problem


def test_logic_built_without_a_member_is_refused_when_built():
    class Half:
        def start(self):
            return []

    spec = ALGORITHMS["fedasync"]
    with pytest.raises(TypeError, match=r"make_policy builds .*Half, which lacks on_event, global_iteration"):
        check_logic(Half(), Policy, spec)
    with pytest.raises(TypeError, match="lacks init_state"):
        check_logic(Half(), ClientLogic, spec)
    with pytest.raises(TypeError, match="lacks evaluate"):
        check_logic(Half(), ServerLogic, spec)


def test_a_protocol_member_with_the_wrong_arguments_is_refused_at_load_and_when_built():
    import dataclasses

    class TwoArgClient:
        def init_state(self, client, indices):  # seed_seq forgotten
            return None

    class Flexible:
        def init_state(self, *args):
            return None

    spec = dataclasses.replace(ALGORITHMS["fedasync"], make_client=TwoArgClient)
    (problem,) = check_spec(spec)
    assert problem == (
        "algorithm.name: make_client builds "
        f"{TwoArgClient.__qualname__}, whose init_state(self, client, indices) cannot take "
        "(client, indices, seed_seq) as raysfl.api.ClientLogic calls it"
    )
    wrong = r"init_state\(client, indices\) cannot take \(client, indices, seed_seq\)"
    with pytest.raises(TypeError, match=wrong):
        check_logic(TwoArgClient(), ClientLogic, spec)
    assert check_logic(Flexible(), ClientLogic, spec) is not None
    assert check_spec(dataclasses.replace(spec, make_client=Flexible)) == []


def test_params_must_be_frozen_and_family_split_or_fl():
    import dataclasses

    @dataclasses.dataclass
    class Loose:
        alpha: float = 0.5

    spec = dataclasses.replace(ALGORITHMS["fedasync"], params=Loose, family="hybrid")
    assert check_spec(spec) == [
        "algorithm.name: AlgorithmSpec 'fedasync'.params is not frozen; declare it @dataclass(frozen=True)",
        "algorithm.name: AlgorithmSpec 'fedasync'.family is 'hybrid'; it is one of 'split', 'fl'",
    ]


def test_params_defaults_are_checked_as_given_values_are():
    """A default no user gave would otherwise run unchecked (the API audit's 0 with ge=1: a ZeroDivisionError
    in the policy; 2.5 for an int; nan: a run trained to NaN with exit 0)."""
    import dataclasses

    from raysfl.config import option

    @dataclasses.dataclass(frozen=True)
    class BadDefaults:
        every: int = option(0, ge=1)
        steps: int = option(2.5)
        rounds: int = option(3.0)
        mode: str = option("data_size", choices=("data-size", "uniform"))
        scale: float = option(float("nan"))
        fine: float = option(1, gt=0)  # an int for a float widens, as a given value does

    @dataclasses.dataclass(frozen=True)
    class Unresolvable:
        every: "Intt" = option(1)  # noqa: F821 - the misspelt annotation is the point

    where = "algorithm.name: AlgorithmSpec 'fedasync'.params: "
    spec = dataclasses.replace(ALGORITHMS["fedasync"], params=BadDefaults)
    name = BadDefaults.__qualname__
    assert check_spec(spec) == [
        f"{where}{name}.every (default): 0 is out of range; it must be >= 1",
        f"{where}{name}.steps (default): expected an integer, got 2.5",
        f"{where}{name}.rounds (default): expected an integer, got 3.0",
        f"{where}{name}.mode (default): 'data_size' is not allowed; choose one of 'data-size', 'uniform'",
        f"{where}{name}.scale (default): nan is not allowed; give a number",
    ]
    (problem,) = check_spec(dataclasses.replace(spec, params=Unresolvable))
    assert problem.endswith(": an annotation cannot be resolved (NameError: name 'Intt' is not defined)")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("no_such_package.method:SPEC", "no module named 'no_such_package'"),
        ("broken_method:NOT_A_SPEC", "names a int, not a raysfl.api.AlgorithmSpec"),
        ("broken_method:MISSING", "module 'broken_method' has no attribute 'MISSING'"),
        ("broken_method:SPEC.name", "is not an import path"),
        ("no_such_method", "is not a known method"),
    ],
)
def test_a_bad_algorithm_name_exits_2_naming_it(plugin_dir, tmp_path, capsys, name, expected):
    write_module(plugin_dir, "broken_method", BROKEN_POLICY)
    path = tmp_path / "sc.toml"
    path.write_text(f'name = "api"\n[algorithm]\nname = "{name}"\n')
    assert main(["run", str(path), "--backend", "local", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"algorithm.name: {name!r}" in err and expected in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_method_by_import_path_validates_its_params_with_every_other_problem(capsys):
    doc = tiny(HINGE, alpha=1.5, b=-1, unknown=3)
    doc["federation"]["active_clients"] = 0
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(doc)
    text = "\n".join(err.value.problems)
    for field in (
        "algorithm.params.alpha",
        "algorithm.params.b",
        "algorithm.params.unknown",
        "active_clients",
    ):
        assert field in text, field


def test_a_method_by_import_path_joins_the_checkpoint_allow_list():
    sc = scenario_from_dict(tiny(HINGE))
    allowed = state_classes()
    for cls in (sc.algorithm_spec.params, *sc.algorithm_spec.state_classes):
        assert allowed[f"{cls.__module__}:{cls.__qualname__}"] is cls


def test_a_state_class_not_defined_in_its_module_is_refused_at_load_time(plugin_dir):
    write_module(
        plugin_dir,
        "aliased_method",
        """
        import dataclasses
        from examples.fedasync_hinge import method as m

        def make():
            class Local:
                pass
            return Local

        SPEC = dataclasses.replace(m.SPEC, name="aliased", state_classes=(make(),))
        """,
    )
    with pytest.raises(ConfigError, match="is not defined under that name in its module"):
        scenario_from_dict(tiny("aliased_method:SPEC"))


@pytest.fixture
def installed_plugin(monkeypatch):
    """An installed distribution offering the example method as ``hinge_ep`` (entry point)."""
    ep = EntryPoint(name="hinge_ep", value=HINGE, group=resolve_mod.ENTRY_POINT_GROUP)
    monkeypatch.setattr(resolve_mod, "entry_points", lambda group: [ep] if group == ep.group else [])
    monkeypatch.setattr(resolve_mod, "_LOADED", {})
    return ep


def test_installed_methods_are_listed_and_runnable_by_their_entry_point_name(installed_plugin, capsys):
    assert main(["list", "algorithms"]) == 0
    out = capsys.readouterr().out
    assert "installed methods (entry points 'raysfl.algorithms'):" in out
    assert "hinge_ep" in out and HINGE in out
    sc = scenario_from_dict(tiny("hinge_ep", alpha=0.3))
    assert sc.algorithm_spec.name == "fedasync_hinge" and sc.params.alpha == 0.3
    with pytest.raises(ConfigError, match=r"did you mean 'hinge_ep'\?"):
        scenario_from_dict(tiny("hinge_eq"))


def test_a_call_may_name_the_protocol_method_itself():
    assert Call(SERVER, ServerLogic.evaluate).method == "evaluate"
    assert Call(SERVER, "evaluate") == Call(SERVER, ServerLogic.evaluate)


def test_check_spec_names_a_non_spec_and_a_non_dataclass_params():
    assert check_spec(3, "x") == ["x: names a int, not a raysfl.api.AlgorithmSpec"]
    bad = AlgorithmSpec(
        name="b",
        params=int,
        description="",
        family="fl",
        source="",
        make_client=1,
        smoke=("q_s",),
        state_classes=("Cls",),
    )
    problems = check_spec(bad, "x")
    assert any("params is not a dataclass" in p for p in problems)
    assert any("make_client is not callable" in p for p in problems)
    assert any("state_classes must be a tuple of classes" in p for p in problems)
    assert any("smoke: ['q_s'] are not dotted.key=value" in p for p in problems)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_built_in_method_cites_its_paper_and_a_doc_the_repository_holds(name):
    """`raysfl list` printed specs/*.md paths, design notes a user's clone does not have."""
    import re
    from pathlib import Path

    source = ALGORITHMS[name].source
    assert "specs/" not in source
    docs = re.findall(r"docs/algorithms/\w+\.md", source)
    assert len(docs) == 1, source
    assert (Path(__file__).resolve().parents[2] / docs[0]).is_file(), docs[0]
