"""Every package of the tree is installed: a wheel built from a copy of the sources holds each of them.

setup.py finds the packages under raysfl/ and maps the top-level folder actors/ to raysfl.actors; a
non-editable build is the honest check (an editable install would find files in the tree either way).
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "setup.cfg", "README.md", "raysfl", "actors")


def _modules_in_tree() -> set[str]:
    """Every .py file of raysfl/ and actors/ by the path it must have in the wheel."""
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "raysfl").rglob("*.py")}
    actors = ROOT / "actors"
    found |= {f"raysfl/actors/{p.relative_to(actors).as_posix()}" for p in actors.rglob("*.py")}
    return found


@pytest.mark.slow
def test_a_wheel_holds_every_package_of_raysfl_and_the_actor_shells(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--wheel-dir", str(tmp_path / "dist"), str(src)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = (tmp_path / "dist").glob("raysfl-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    in_wheel = {n for n in names if n.endswith(".py")}
    assert "raysfl/py.typed" in names  # PEP 561: a type checker reads an installed raysfl's types
    packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in in_wheel if n.endswith("/__init__.py")}
    assert {"raysfl", "raysfl.actors", "raysfl.algorithms.common", "raysfl.algorithms.fedasync"} <= packages
    assert "actors/__init__.py" not in in_wheel  # the shells install under raysfl/, not at the top level
    assert in_wheel == _modules_in_tree()


def _copy_checkout(dest: Path) -> Path:
    """A second source checkout: pyproject.toml, raysfl/ and actors/, its shells marked as the copy's."""
    dest.mkdir()
    for name in ("pyproject.toml", "raysfl", "actors"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, dest / name)
    with (dest / "actors" / "__init__.py").open("a") as shells:
        shells.write('\nCHECKOUT = "the copy"\n')
    return dest


def test_a_checkout_on_pythonpath_runs_its_own_actor_shells(tmp_path):
    # This tree is installed (editable in development and CI: raysfl.actors mapped to ROOT/actors by path);
    # a second checkout ahead of it on PYTHONPATH must not take this tree's shells with its own raysfl.
    copy = _copy_checkout(tmp_path / "checkout")
    probe = (
        "import sys, raysfl, raysfl.actors, raysfl.actors.client_pool as pool; "
        "print(raysfl.__file__); print(raysfl.actors.__file__); print(pool.__file__); "
        "print(raysfl.actors.CHECKOUT)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(copy)}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    package, shells, pool, mark = done.stdout.splitlines()
    assert Path(package) == copy / "raysfl" / "__init__.py"
    assert Path(shells) == copy / "actors" / "__init__.py"
    assert Path(pool) == copy / "actors" / "client_pool.py"
    assert mark == "the copy"
    # a project named otherwise that holds this package beside an actors/ of its own keeps raysfl's shells
    pyproject = copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('name = "raysfl"', 'name = "their-project"', 1))
    done = subprocess.run(
        [sys.executable, "-c", "import raysfl.actors; print(raysfl.actors.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert copy not in Path(done.stdout.strip()).parents, done.stdout


def test_importing_raysfl_binds_its_own_shells_without_importing_ray(tmp_path):
    probe = (
        "import sys, raysfl; print(raysfl.actors.__file__); "
        "print(sorted({'ray', 'torch'} & set(sys.modules)))"
    )
    env = os.environ | {"PYTHONPATH": str(ROOT)}  # this checkout's raysfl, however it is installed
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shells, heavy = done.stdout.splitlines()
    assert Path(shells) == ROOT / "actors" / "__init__.py"
    assert heavy == "[]"  # the shells' package is a docstring; Ray comes with its modules
