"""PyTorch steps of scripts/gpu-check.sh: the same run with and without gleam.

``models.py available``      torch.cuda.is_available() and the device's name
``models.py resnet18``       a ResNet-18 forward pass (torchvision, random weights)
``models.py gpt2``           a small GPT-2 forward and backward pass (transformers,
                             random initialisation)

Every model is built on the CPU from a fixed seed, so both runs start from the
same weights and inputs; cuDNN and cuBLAS are asked for deterministic
algorithms. The step writes ``--out`` as JSON: ``outputs`` (name → list of
floats, compared by compare.py), ``wall_s`` (the whole step after the model is
built, first CUDA call to the last result on the host) and ``step_s`` (one
timed pass after a warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

SEED = 1234


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=("available", "resnet18", "gpt2"))
    p.add_argument("--out", required=True, help="where the JSON result goes")
    p.add_argument("--batch", type=int, default=4, help="images (resnet18) or sequences (gpt2)")
    return p.parse_args(argv)


def deterministic() -> Any:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.manual_seed(SEED)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch


def timed(torch: Any, fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


def flat(t: Any, limit: int = 4096) -> list[float]:
    return [float(v) for v in t.detach().float().cpu().reshape(-1)[:limit]]


def run_available(torch: Any, args: argparse.Namespace) -> dict[str, Any]:
    ok = bool(torch.cuda.is_available())
    return {"available": ok, "device": torch.cuda.get_device_name(0) if ok else None,
            "count": torch.cuda.device_count(), "outputs": {"available": [float(ok)]}}


def run_resnet18(torch: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torchvision  # type: ignore[import-not-found]

    model = torchvision.models.resnet18(weights=None).eval()
    images = torch.randn(args.batch, 3, 224, 224)
    start = time.perf_counter()
    model = model.cuda()
    x = images.cuda()
    with torch.no_grad():
        timed(torch, lambda: model(x))  # warm-up: cuDNN picks its kernels
        logits, step = timed(torch, lambda: model(x))
    out = flat(logits)
    return {"outputs": {"logits": out}, "wall_s": time.perf_counter() - start, "step_s": step}


def run_gpt2(torch: Any, args: argparse.Namespace) -> dict[str, Any]:
    from transformers import GPT2Config, GPT2LMHeadModel  # type: ignore[import-not-found]

    # Eager attention: the fused attention kernels' backward passes add with atomics,
    # which makes two runs differ in the last bits.
    config = GPT2Config(vocab_size=2048, n_positions=128, n_embd=256, n_layer=4, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        attn_implementation="eager")
    model = GPT2LMHeadModel(config)
    ids = torch.randint(0, config.vocab_size, (args.batch, 64))
    start = time.perf_counter()
    model = model.cuda().train()
    x = ids.cuda()

    def step() -> Any:
        model.zero_grad(set_to_none=True)
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        return out

    timed(torch, step)  # warm-up
    out, step_s = timed(torch, step)
    grads = [p.grad.norm() for p in model.parameters() if p.grad is not None]
    return {"outputs": {"loss": flat(out.loss), "logits": flat(out.logits),
                        "grad_norms": [float(g) for g in torch.stack(grads).cpu()]},
            "wall_s": time.perf_counter() - start, "step_s": step_s}


STEPS = {"available": run_available, "resnet18": run_resnet18, "gpt2": run_gpt2}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch = deterministic()
    result = STEPS[args.model](torch, args)
    with open(args.out, "w") as f:
        json.dump({"step": args.model, **result}, f)
    print(json.dumps({k: v for k, v in result.items() if k != "outputs"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
