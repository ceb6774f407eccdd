"""An embedded Ray runs with token authentication (Ray >= 2.60): its ports listen on every interface.

Its token file is one raysfl made owner-only (``raysfl.engine.ray_token``), not Ray's (the umask's 0644).
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux only)"),
]

PROBE = """
import json, os, stat
from pathlib import Path
from raysfl.engine import cluster, ray_token, reaper
os.umask(0o022)  # Ray's own token file would be 0644
token_file = Path(os.environ["HOME"]) / ".ray" / "auth_token"
made = {}
secure = ray_token.secure_token_file
def note_what_raysfl_made():  # calls through; records the file as raysfl left it, before ray.init
    warning = secure()
    made["token"] = token_file.read_text() if token_file.exists() else None
    return warning
ray_token.secure_token_file = note_what_raysfl_made
cluster.ensure_ray(None)
token = token_file.read_text() if token_file.exists() else None
token_mode = stat.S_IMODE(token_file.stat().st_mode) if token_file.exists() else None
modes = set()
for pid in reaper.ray_pids(os.getpid(), "-"):
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\\0")
    except OSError:
        continue
    modes |= {e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"RAY_AUTH_MODE=")}
print(json.dumps({
    "driver": os.environ.get("RAY_AUTH_MODE"),
    "ray_processes": sorted(modes),
    "token_file_mode": token_mode,
    "ray_kept_raysfls_token": token is not None and token == made.get("token"),
}))
cluster.shutdown_ray()
"""


def _probe(mode: str | None, home) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_") and k != "RAY_ADDRESS"}
    env["HOME"] = str(home)  # a home without ~/.ray: the token file is made by this start
    if mode is not None:
        env["RAY_AUTH_MODE"] = mode
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_embedded_ray_has_token_authentication_on_unless_the_user_says_otherwise(tmp_path):
    (tmp_path / "on").mkdir()
    assert _probe(None, tmp_path / "on") == {
        "driver": "token",
        "ray_processes": ["token"],
        "token_file_mode": 0o600,  # raysfl's, owner-only; Ray found it and wrote none of its own
        "ray_kept_raysfls_token": True,
    }
    (tmp_path / "off").mkdir()
    assert _probe("disabled", tmp_path / "off") == {
        "driver": "disabled",
        "ray_processes": ["disabled"],
        "token_file_mode": None,
        "ray_kept_raysfls_token": False,
    }
    assert not (tmp_path / "off" / ".ray").exists()
