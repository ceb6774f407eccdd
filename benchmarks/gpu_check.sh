#!/usr/bin/env bash
# The server's GPU checks in one call on a GPU machine (issue 17, part 4; docs/architecture.md, "What runs
# where"): what torch sees, then tests/gpu (every method with its server on CUDA: determinism, resume,
# agreement with a CPU server, the synchronisation audit; where Ray imports, the server actor on the GPU
# against the local backend), then, given a data folder holding fashion-mnist/, one global iteration of
# scenarios/gas/reference_code.toml profiled with the server on CUDA and on the CPU (local backend).
# Needs torch, numpy, pyarrow, tensorboard and pytest; Ray only for tests/gpu/test_cuda_ray.py. Without an
# installed raysfl (pip install -e .), the Ray test needs `ln -s "$PWD/actors" raysfl/actors` first: the
# package maps the top-level actors/ folder to raysfl.actors when it is installed.
#
# Usage: [PYTHON=python3] [PROFILE_DEVICES="cuda cpu"] benchmarks/gpu_check.sh OUT_DIR [DATA_DIR]
# (from the repository root)
# Writes env.txt, pytest.log, gpu_syncs.json, gpu_vs_cpu.json and profile_gas_{cuda,cpu}.md to OUT_DIR.
set -u
out=${1:?usage: benchmarks/gpu_check.sh OUT_DIR [DATA_DIR]}
data=${2:-}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

"$py" - >"$out/env.txt" 2>&1 <<'EOF'
import os, platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version(), "cpus", os.cpu_count())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "sms", p.multi_processor_count, "memory GiB", round(p.total_memory / 2**30, 1))
else:
    print("torch sees no CUDA device")
EOF
cat "$out/env.txt"

RAYSFL_GPU_REPORT="$out" timeout 300 "$py" -m pytest tests/gpu -q -p no:cacheprovider >"$out/pytest.log" 2>&1
echo "tests/gpu exit status $?"
tail -n 40 "$out/pytest.log"

if [ -n "$data" ]; then
    for dev in ${PROFILE_DEVICES:-cuda cpu}; do
        timeout 150 "$py" benchmarks/profile_gas.py --backend local --iterations 1 --data-dir "$data" \
            --set "engine.server_device=$dev" >"$out/profile_gas_$dev.md" 2>&1
        echo "profile_gas server_device=$dev exit status $?"
        head -n 40 "$out/profile_gas_$dev.md"
    done
fi
