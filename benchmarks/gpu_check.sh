#!/usr/bin/env bash
# The server's GPU checks in one call on a GPU machine (issue 17, part 4; docs/architecture.md, "What runs
# where"): what torch sees, then tests/gpu (every method with its server on CUDA: determinism, resume,
# agreement with a CPU server, the synchronisation audit, bfloat16; every zoo model's server step repeating
# bit for bit; where Ray imports, the server actor on the GPU against the local backend), then one global
# iteration of scenarios/gas/reference_code.toml profiled per server device and precision (local backend),
# on the data folder's fashion-mnist/ when DATA_DIR is given, else on synthetic data of its shapes (60,000 +
# 10,000 images); the first profile runs twice, and its two runs' metrics must be equal (repeat.txt).
# Needs torch, numpy, pyarrow, tensorboard and pytest; Ray only for tests/gpu/test_cuda_ray.py. Without an
# installed raysfl (pip install -e .), the Ray test needs `ln -s "$PWD/actors" raysfl/actors` first: the
# package maps the top-level actors/ folder to raysfl.actors when it is installed.
#
# Usage: [PYTHON=python3] [PROFILE_DEVICES="cuda cpu"] [PROFILE_PRECISIONS="float32"] [RUNS_DIR=DIR] \
#        benchmarks/gpu_check.sh OUT_DIR [DATA_DIR]        (from the repository root)
# Writes env.txt, pytest.log, gpu_syncs.json, gpu_vs_cpu.json, gpu_zoo.json,
# profile_gas_{device}_{precision}.md and repeat.txt to OUT_DIR, the profiled runs to RUNS_DIR (OUT_DIR/runs).
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

RAYSFL_GPU_REPORT="$out" timeout 420 "$py" -m pytest tests/gpu -q -p no:cacheprovider >"$out/pytest.log" 2>&1
echo "tests/gpu exit status $?"
tail -n 40 "$out/pytest.log"

if [ -n "$data" ]; then
    source=(--data-dir "$data")
else
    source=(--set data.dataset=synthetic --set data.synthetic_train=60000 --set data.synthetic_test=10000)
fi
repeat=""
runs_dir=${RUNS_DIR:-$out/runs}
for dev in ${PROFILE_DEVICES:-cuda cpu}; do
    for precision in ${PROFILE_PRECISIONS:-float32}; do
        name="profile_gas_${dev}_${precision}"
        runs=1
        [ -z "$repeat" ] && runs=2 && repeat="$runs_dir/$name"
        for run in $(seq "$runs"); do
            timeout 150 "$py" benchmarks/profile_gas.py --backend local --iterations 1 "${source[@]}" \
                --set "engine.server_device=$dev" --set "engine.precision=$precision" \
                --peak-seconds 0 --out "$runs_dir/$name.run$run" >"$out/$name.md" 2>&1
            echo "$name run $run exit status $?"
        done
        head -n 30 "$out/$name.md"
    done
done
if [ -n "$repeat" ]; then
    "$py" - "$repeat.run1" "$repeat.run2" >"$out/repeat.txt" 2>&1 <<'EOF'
import sys
import pyarrow.parquet as pq
a, b = (pq.read_table(f"{d}/metrics.parquet").drop(["wall_s"]).to_pylist() for d in sys.argv[1:])
print("metrics of the two runs", "equal" if a == b else "DIFFER", f"({len(a)} rows)")
print(a[-1] if a == b else f"{a[-1]}\n{b[-1]}")
EOF
    cat "$out/repeat.txt"
fi
