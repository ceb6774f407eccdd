"""An embedded Ray runs with token authentication (Ray >= 2.60): its ports listen on every interface."""

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
import json, os
from pathlib import Path
from raysfl.engine import cluster, reaper
cluster.ensure_ray(None)
modes = set()
for pid in reaper.ray_pids(os.getpid(), "-"):
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\\0")
    except OSError:
        continue
    modes |= {e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"RAY_AUTH_MODE=")}
print(json.dumps({"driver": os.environ.get("RAY_AUTH_MODE"), "ray_processes": sorted(modes)}))
cluster.shutdown_ray()
"""


def _probe(mode: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    if mode is not None:
        env["RAY_AUTH_MODE"] = mode
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_embedded_ray_has_token_authentication_on_unless_the_user_says_otherwise():
    assert _probe(None) == {"driver": "token", "ray_processes": ["token"]}
    assert _probe("disabled") == {"driver": "disabled", "ray_processes": ["disabled"]}
