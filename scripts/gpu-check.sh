#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU and no network (issue 10's check):
#
#   scripts/gpu-wheels.sh        # beforehand, where pip works: gleam's dependencies as wheels
#   scripts/gpu-check.sh         # on the GPU machine (Python 3.12, torch, torchvision,
#                                # transformers, CuPy, cuda-python and nvcc already there)
#
# It builds gleam into a virtual environment that sees the machine's packages
# (from .gpu-wheels with pip --no-index when that folder exists), starts a
# cuda-backend agent and a client agent on 127.0.0.1 (mDNS off), and runs, each
# once without gleam and once through it: the runtime-API example programs
# (built with nvcc; their verdicts must be equal), the driver-API examples, the
# Python-bindings examples, CuPy (including a cuBLAS matmul) and PyTorch
# (torch.cuda.is_available(), a ResNet-18 forward pass, a small GPT-2 forward and
# backward pass; outputs equal within 1e-4 relative to the run without gleam).
# It prints PASS/FAIL per step, a table of wall time, calls, waiting calls, bytes
# sent and round trips, and writes a JSON summary (GLEAM_GPU_CHECK_SUMMARY, else
# gpu-check-summary.json in the current folder) and the steps' logs beside it
# (...-logs.tar.gz). Every process it starts is stopped. The whole check keeps
# to GLEAM_GPU_CHECK_BUDGET seconds (default 460). GLEAM_GPU_CHECK_BACKEND=host
# rehearses the plumbing on a machine without a GPU (the direct runs then fail).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps_py="$root/scripts/gpu_check"
work="$(mktemp -d /tmp/gleam-gpu-check.XXXXXX)"
summary="${GLEAM_GPU_CHECK_SUMMARY:-$PWD/gpu-check-summary.json}"
backend="${GLEAM_GPU_CHECK_BACKEND:-cuda}"
deadline=$((SECONDS + ${GLEAM_GPU_CHECK_BUDGET:-460}))
sys_py="${PYTHON:-python3}"
py="$work/venv/bin/python"
pids=()

cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
    [ -n "${GLEAM_GPU_CHECK_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT INT TERM

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$work/steps.tsv"; }

# step NAME LIMIT COMMAND...: run it (stdout and stderr to NAME.log) within LIMIT
# seconds and what is left of the budget; record PASS or FAIL with the log's tail.
step() {
    local name="$1" limit="$2" left=$((deadline - SECONDS)) start=$SECONDS
    shift 2
    if [ "$left" -lt 5 ]; then
        record FAIL "$name" 0 "not run: the check's time budget is spent"
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    if timeout "$limit" "$@" >"$work/$name.log" 2>&1; then
        record PASS "$name" $((SECONDS - start)) ""
        return 0
    fi
    record FAIL "$name" $((SECONDS - start)) "$(tail -n 3 "$work/$name.log" | tr '\n\t' '  ')"
    return 1
}

# Commands, not functions: timeout runs them. Runs through gleam name each call
# that fails (GLEAM_TRACE=errors), so one run on a GPU says where a step stopped.
through=(env GLEAM_TRACE=errors "$py" -m gleam.peer run --state-dir "$work/client" --)
direct=(env -u LD_LIBRARY_PATH)

# same NAME LIMIT PROGRAM...: the program without gleam, then through it; their
# last JSON lines (each program's verdict) must be there and be equal.
same() {
    local name="$1" limit="$2"
    shift 2
    step "direct-$name" "$limit" "${direct[@]}" "$@"
    step "gleam-$name" "$limit" "${through[@]}" "$@"
    step "same-$name" 5 bash -c 'a="$(grep "^{" "$1" | tail -n 1)"; b="$(grep "^{" "$2" | tail -n 1)"
        echo "without gleam: $a"; echo "through gleam: $b"; [ -n "$a" ] && [ "$a" = "$b" ]' _ \
        "$work/direct-$name.log" "$work/gleam-$name.log"
}

# compared NAME LIMIT SCRIPT ARGS...: a step script that writes --out, without
# gleam and through it; then its outputs compared and the gleam run's figures.
compared() {
    local name="$1" limit="$2" script="$3"
    shift 3
    step "direct-$name" "$limit" "${direct[@]}" "$py" "$steps_py/$script" "$@" \
        --out "$work/direct-$name.json"
    local since
    since="$(date +%s)"
    step "gleam-$name" "$limit" "${through[@]}" "$py" "$steps_py/$script" "$@" \
        --out "$work/gleam-$name.json"
    step "stats-$name" 15 "$py" "$steps_py/stats.py" --state-dir "$work/client" \
        --since "$since" --out "$work/stats-$name.json"
    step "compare-$name" 15 bash -c '"$1" "$2" "$3" "$4" >"$5"; s=$?; cat "$5"; exit $s' _ \
        "$py" "$steps_py/compare.py" "$work/direct-$name.json" "$work/gleam-$name.json" \
        "$work/compare-$name.json"
}

# ---- build gleam (its dependencies from .gpu-wheels when there: no network)
pip_from=()
[ -d "$root/.gpu-wheels" ] && pip_from=(--no-index --find-links "$root/.gpu-wheels")
step venv 60 "$sys_py" -m venv --system-site-packages "$work/venv"
step build-tools 60 "$py" -m pip install -q "${pip_from[@]}" "setuptools>=77" wheel "cffi>=1.17"
step build 180 "$py" -m pip install -q --no-build-isolation "${pip_from[@]}" "$root"
step nvidia-smi 20 nvidia-smi -L

# ---- agents: a cuda-backend server and a client without a device, on loopback
"$py" -m gleam.peer --log-level info up --no-tui --no-mdns --host 127.0.0.1 --port 7591 \
    --state-dir "$work/server" --name gpu-server --backend "$backend" >"$work/server.log" 2>&1 &
pids+=($!)
step "server-is-$backend" 30 "$py" - "$work/server" "$backend" <<'PY'
import json, subprocess, sys, time
deadline = time.monotonic() + 25
while True:
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "status", "--json",
                           "--state-dir", sys.argv[1]], capture_output=True, text=True)
    cuda = json.loads(done.stdout).get("cuda", {}) if done.returncode == 0 else {}
    if cuda.get("backend") == sys.argv[2]:
        break
    if time.monotonic() > deadline:
        sys.exit(f"the server's backend is not {sys.argv[2]}: {cuda or done.stderr}")
    time.sleep(0.2)
PY
mkdir -p "$work/client"
code="$("$py" -m gleam.peer mesh show --state-dir "$work/server" 2>/dev/null)"
"$py" -m gleam.peer mesh import --state-dir "$work/client" "$code" >/dev/null 2>&1
"$py" -m gleam.peer --log-level info up --no-tui --no-mdns --host 127.0.0.1 --port 7592 \
    --state-dir "$work/client" --name gpu-client --backend none --peer 127.0.0.1:7591 \
    >"$work/client.log" 2>&1 &
pids+=($!)
step client-linked 30 "$py" - "$work/client" <<'PY'
import json, subprocess, sys, time
deadline = time.monotonic() + 25
while True:
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "status", "--json",
                           "--state-dir", sys.argv[1]], capture_output=True, text=True)
    peers = json.loads(done.stdout).get("peers", []) if done.returncode == 0 else []
    if any(p.get("authenticated") for p in peers):
        break
    if time.monotonic() > deadline:
        sys.exit("the client agent did not link to the server")
    time.sleep(0.2)
PY

# ---- runtime-API programs built by nvcc (static cudart): equal verdicts
bin="$work/bin"
mkdir -p "$bin"
runtime_src="$root/examples/cuda/runtime"
for prog in vadd streams symbols errors threads reset props pitched graphs textures; do
    step "nvcc-$prog" 90 nvcc -o "$bin/$prog" "$runtime_src/$prog.cu"
done
for prog in vadd streams symbols errors threads reset props pitched graphs textures; do
    same "runtime-$prog" 60 "$bin/$prog"
done

# ---- driver-API examples and NVIDIA's Python bindings
# cuda.h: beside nvcc, or in the usual toolkit folders (nvcc may be a wrapper script).
cuda_inc=""
for dir in "${CUDA_HOME:-/nonexistent}/include" \
    "$(dirname "$(readlink -f "$(command -v nvcc)")")/../include" /usr/local/cuda/include \
    /usr/local/cuda-*/include; do
    [ -f "$dir/cuda.h" ] && { cuda_inc="$dir"; break; }
done
lib="$("$py" -m gleam.peer lib)"
ptx="$root/peer/cuda/ptx/kernels.ptx"
for ex in device_query vector_add mlp_infer saxpy_streams; do
    step "gcc-$ex" 60 gcc -O2 -std=gnu11 -I "$cuda_inc" -o "$bin/$ex" "$root/examples/cuda/$ex.c" \
        -L "$lib" -l:libcuda.so.1 -lm
done
for ex in vector_add mlp_infer saxpy_streams; do
    step "direct-$ex" 60 "${direct[@]}" "$bin/$ex" "$ptx"
    step "gleam-$ex" 60 "${through[@]}" "$bin/$ex" "$ptx"
done
step gleam-device_query 30 "${through[@]}" "$bin/device_query" "$ptx"
# CUDA graphs, one program per kind of node, and stream capture: equal verdicts.
for ex in graph_kernel graph_memcpy graph_memset graph_host graph_event graph_child \
    graph_memnodes graph_capture graph_host_errors; do
    step "gcc-$ex" 60 gcc -O2 -std=gnu11 -I "$cuda_inc" -o "$bin/$ex" "$root/examples/cuda/$ex.c" \
        -L "$lib" -l:libcuda.so.1 -lm
    same "$ex" 60 "$bin/$ex" "$ptx"
done
same python-vector_add 60 "$py" "$root/examples/cuda/vector_add_bindings.py" "$ptx"
same python-runtime 60 "$py" "$root/examples/cuda/runtime_bindings.py"
same python-driver-calls 60 "$py" "$root/examples/cuda/driver_calls.py"
same python-pitched 60 "$py" "$root/examples/cuda/pitched_copies.py"
# CUDA arrays, texture and surface objects made by the serving driver.
same python-arrays-textures 60 "$py" "$root/examples/cuda/arrays_textures.py"
# Tensor maps encoded by the serving driver, and a TMA kernel that reads through them.
same python-tensor-maps 60 "$py" "$root/examples/cuda/tensor_maps.py"
# Thread-block clusters (cuLaunchKernelEx), as cuBLASLt and cuDNN launch on Hopper.
same python-clusters 60 "$py" "$root/examples/cuda/clusters.py"
# Mapped and managed memory: CPU writes, kernels, CPU reads, with no copies.
same python-managed 60 "$py" "$root/examples/cuda/managed_memory.py" "$ptx"

# ---- CuPy (a cuBLAS matmul among its steps) and PyTorch, compared
compared cupy 90 cupy_step.py
compared available 60 models.py available
compared resnet18 120 models.py resnet18
compared gpt2 150 models.py gpt2

if grep -q '^FAIL' "$work/steps.tsv"; then
    echo "-- agent logs: server"; tail -n 20 "$work/server.log"
    echo "-- client"; tail -n 20 "$work/client.log"
fi
"$sys_py" "$steps_py/report.py" --work "$work" --summary "$summary"
status=$?
# Every step's log and the agents', beside the summary, for reading afterwards.
logs="${summary%.json}-logs.tar.gz"
tar -czf "$logs" -C "$work" --exclude=./venv --exclude=./bin --exclude=./server \
    --exclude=./client . 2>/dev/null && echo "logs: $logs"
exit "$status"
