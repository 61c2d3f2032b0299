#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: build gleam, start a cuda-backend
# agent and a client agent on loopback, run the examples through the interposer
# (and directly on the driver, for comparison), a PyTorch matmul through the
# interposer when torch with CUDA is installed, and print pass/fail per step.
# Everything runs on 127.0.0.1 with mDNS off; every process started is stopped.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d /tmp/gleam-gpu-check.XXXXXX)"
pids=()
results=()
failed=0

cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

step() { # step NAME COMMAND... : run with a 120 s limit, record pass/fail
    local name="$1"; shift
    local start=$SECONDS
    if timeout 120 "$@" >"$work/$name.log" 2>&1; then
        results+=("PASS  $name ($((SECONDS - start)) s)")
    else
        results+=("FAIL  $name ($((SECONDS - start)) s): $(tail -n 3 "$work/$name.log" | tr '\n' ' ')")
        failed=1
    fi
}

step build "$root/scripts/bootstrap.sh"
source "$root/scripts/bootstrap.sh" >/dev/null 2>&1
py="$root/.venv/bin/python"
step nvidia-smi nvidia-smi -L

cuda_inc="$("$py" -c 'import nvidia.cuda_runtime as r, os; print(os.path.join(list(r.__path__)[0], "include"))')"
lib="$("$py" -m gleam.peer lib)"
ptx="$root/peer/cuda/ptx/kernels.ptx"
fatbin="$root/peer/cuda/ptx/kernels.fatbin"
mkdir -p "$work/bin"
for ex in device_query vector_add mlp_infer saxpy_streams; do
    step "compile-$ex" gcc -O2 -std=gnu11 -I "$cuda_inc" -o "$work/bin/$ex" \
        "$root/examples/cuda/$ex.c" -L "$lib" -l:libcuda.so.1 -lm
done

# The same binaries on the real driver, without gleam (the system's libcuda.so.1).
for ex in device_query vector_add mlp_infer; do
    step "direct-$ex" env -u LD_LIBRARY_PATH "$work/bin/$ex" "$ptx"
done

"$py" -m gleam.peer --log-level info up --no-tui --no-mdns --host 127.0.0.1 --port 7591 \
    --state-dir "$work/server" --name gpu-server --backend cuda >"$work/server.log" 2>&1 &
pids+=($!)
sleep 3
mkdir -p "$work/client"
"$py" -m gleam.peer mesh show --state-dir "$work/server" >"$work/code" 2>/dev/null || true
"$py" -m gleam.peer mesh import --state-dir "$work/client" "$(cat "$work/code")" >/dev/null 2>&1 || true
"$py" -m gleam.peer --log-level info up --no-tui --no-mdns --host 127.0.0.1 --port 7592 \
    --state-dir "$work/client" --name gpu-client --backend none --peer 127.0.0.1:7591 \
    >"$work/client.log" 2>&1 &
pids+=($!)
sleep 5
step server-backend-is-cuda "$py" -c '
import json, subprocess, sys
doc = json.loads(subprocess.check_output([sys.executable, "-m", "gleam.peer", "status", "--json",
                                          "--state-dir", sys.argv[1]]))
assert doc.get("cuda", {}).get("backend") == "cuda", doc.get("cuda")' "$work/server"

run() { "$py" -m gleam.peer run --state-dir "$work/client" -- "$@"; }
step gleam-device_query run "$work/bin/device_query" "$ptx"
step gleam-vector_add-ptx run "$work/bin/vector_add" "$ptx"
step gleam-vector_add-fatbin run "$work/bin/vector_add" "$fatbin"
step gleam-mlp_infer run "$work/bin/mlp_infer" "$ptx" 50
step gleam-saxpy_streams run "$work/bin/saxpy_streams" "$ptx"
step gleam-python-bindings run "$py" "$root/examples/cuda/vector_add_bindings.py" "$ptx"
if "$py" -c 'import torch; assert torch.version.cuda' 2>/dev/null; then
    step gleam-torch-matmul run "$py" -c '
import torch
a = torch.randn(512, 512); b = torch.randn(512, 512)
got = (a.cuda() @ b.cuda()).cpu()
assert torch.allclose(got, a @ b, atol=1e-3), "matmul mismatch"
print("torch matmul through gleam: ok")'
else
    results+=("SKIP  gleam-torch-matmul: no CUDA build of torch installed")
fi

printf '\n== gleam gpu-check on %s\n' "$(hostname)"
printf '%s\n' "${results[@]}"
if [ "$failed" -ne 0 ]; then
    echo "-- agent logs: server"; tail -n 20 "$work/server.log"
    echo "-- client"; tail -n 20 "$work/client.log"
fi
exit "$failed"
