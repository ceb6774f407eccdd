"""`make install TORCH_INDEX=URL` gets PyTorch's CPU build where PyPI alone would give the CUDA one.

The CPU index itself cannot be reached from the test machines, so the two halves are checked apart: the
Makefile hands the URL to pip (and adds nothing by default), and pip, given a pinned ``==2.13.0`` and a
second source that holds ``2.13.0+cpu``, takes the ``+cpu`` build (PEP 440 ignores local labels in the pin).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _make_n(tmp_path: Path, *args: str) -> str:
    """The commands `make install` would run for a venv that does not exist yet (nothing is run)."""
    out = subprocess.run(
        ["make", "-n", "install", f"VENV={tmp_path / 'venv'}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (pip,) = [line for line in out.splitlines() if "pip install" in line]
    return pip


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_passes_torch_index_to_pip_and_nothing_by_default(tmp_path):
    default = _make_n(tmp_path)
    assert "-c constraints-cpu.txt" in default and "index-url" not in default
    chosen = _make_n(tmp_path, f"TORCH_INDEX={CPU_INDEX}")
    assert f"--extra-index-url {CPU_INDEX}" in chosen and "-c constraints-cpu.txt" in chosen


def _wheel(folder: Path, version: str) -> None:
    """A minimal wheel of the package ``fake_torch_probe`` (metadata only)."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"fake_torch_probe-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: fake-torch-probe\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text)}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / f"fake_torch_probe-{version}-py3-none-any.whl", "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)


def test_a_plain_version_pin_takes_the_cpu_build_from_a_second_source(tmp_path):
    _wheel(tmp_path / "pypi", "2.13.0")  # what PyPI holds (the CUDA build, for torch)
    _wheel(tmp_path / "cpu", "2.13.0+cpu")  # what the extra index holds
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("fake-torch-probe==2.13.0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip configuration must not take part
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", "--no-index"]
        + ["--find-links", str(tmp_path / "pypi"), "--find-links", str(tmp_path / "cpu")]
        + ["--ignore-installed", "-c", str(constraints), "fake-torch-probe"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    (chosen,) = [item["metadata"]["version"] for item in json.loads(proc.stdout)["install"]]
    assert chosen == "2.13.0+cpu"
