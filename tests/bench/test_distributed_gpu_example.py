"""examples/distributed_gpu.py on the CPU (gloo, 2 processes through torchrun): its argument
checks, --help, the stock-PyTorch model it times next to mytorch's (the same model: same
weights, same losses), and a whole --check --bench run printing both impls' rows. Nothing
here asserts a speed."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "distributed_gpu.py"
TINY = ["--vocab", "128", "--dim", "64", "--layers", "1", "--heads", "2", "--seq", "32",
        "--batch", "2", "--steps", "2", "--warmup", "1", "--check-steps", "2"]


@pytest.fixture(scope="module")
def example():
    # the script sets MYTORCH_DEVICE=0 for its own processes: keep that out of this one's
    # environment, which later tests' subprocesses inherit
    before = os.environ.get("MYTORCH_DEVICE")
    spec = importlib.util.spec_from_file_location("distributed_gpu_example", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    finally:
        if before is None:
            os.environ.pop("MYTORCH_DEVICE", None)
        else:
            os.environ["MYTORCH_DEVICE"] = before
    return mod


def _error(example, argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        example.parse_args(argv)
    return err.getvalue().strip().splitlines()[-1]


def test_arguments(example):
    args = example.parse_args([])
    assert (args.mode, args.impls, args.check, args.bench) == ("ddp", ["mytorch", "stock"], True, False)
    args = example.parse_args(["--bench", "--impls", "stock", "--mode", "fsdp"])
    assert (args.mode, args.impls, args.check, args.bench) == ("fsdp", ["stock"], False, True)
    assert example.parse_args(["--impls", "stock,mytorch,stock"]).impls == ["stock", "mytorch"]
    prog = "distributed_gpu.py: error: "
    assert _error(example, ["--impls", "mytorch,aten"]) == (
        prog + "--impls takes a comma-separated list of mytorch, stock, got 'mytorch,aten'")
    assert _error(example, ["--impls", ","]) == (
        prog + "--impls takes a comma-separated list of mytorch, stock, got ','")
    assert _error(example, ["--dim", "100", "--heads", "8"]) == (
        prog + "--dim must be a multiple of --heads with an even head size, got --dim 100 --heads 8")
    assert _error(example, ["--steps", "0"]) == prog + "--steps must be at least 1, got 0"
    assert _error(example, ["--fsdp-blocks-per-unit", "0"]) == (
        prog + "--fsdp-blocks-per-unit must be at least 1, got 0")
    args = example.parse_args(["--mode", "fsdp", "--fsdp-blocks-per-unit", "4", "--fsdp-no-reshard",
                               "--fused-adamw"])
    assert (args.fsdp_blocks_per_unit, args.fsdp_no_reshard, args.fused_adamw) == (4, True, True)
    assert _error(example, ["--mode", "zero"]).startswith(prog + "argument --mode: invalid choice")


def test_help():
    r = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "--impls IMPLS" in r.stdout and "--bench" in r.stdout, r.stdout


def test_stock_model_is_the_same_model(example):
    """Same weights, and the same loss and gradients up to rounding: the stock column times
    the model the mytorch column times."""
    args = example.parse_args(TINY)
    tokens = torch.randint(0, args.vocab, (2, args.seq + 1), generator=torch.Generator().manual_seed(0))
    out = {}
    for impl in ("mytorch", "stock"):
        model = example.build_model(args, torch.device("cpu"), impl)
        loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        out[impl] = loss.detach(), {n: p.grad for n, p in model.named_parameters()}
    (loss_m, grads_m), (loss_s, grads_s) = out["mytorch"], out["stock"]
    torch.testing.assert_close(loss_m, loss_s, rtol=1e-5, atol=1e-5)
    assert grads_m.keys() == grads_s.keys() and grads_m
    for n in grads_m:
        torch.testing.assert_close(grads_m[n], grads_s[n], rtol=1e-4, atol=1e-5, msg=n)


def test_report(example):
    args = example.parse_args(TINY + ["--mode", "fsdp"])
    text = example.report(args, 2, "GPU", [("mytorch", 1.0, 0.8), ("stock", 0.8, 0.5)])
    assert text.splitlines()[1:] == [
        "| model ops | setup | step ms | tokens/s | speed-up |", "|---|---|---|---|---|",
        "| mytorch | 1 device | 500.0 | 256 | 1.00x |",
        "| mytorch | 2 devices (fsdp) | 400.0 | 320 | 1.25x |",
        "| stock | 1 device | 400.0 | 320 | 1.00x |",
        "| stock | 2 devices (fsdp) | 250.0 | 512 | 1.60x |",
        "mytorch vs stock tokens/s: 0.80x on 1 device, 0.62x on 2 devices"]


@pytest.mark.parametrize("mode,extra", [
    ("ddp", []), ("fsdp", []),
    # units of blocks (0, 1) and (2,)
    ("fsdp", ["--layers", "3", "--fsdp-blocks-per-unit", "2", "--fsdp-no-reshard"]),
], ids=["ddp", "fsdp", "fsdp-grouped"])
def test_two_cpu_processes(mode, extra):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    port = 29500 + (os.getpid() % 1000) + (mode == "fsdp") + 2 * bool(extra)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(port), str(SCRIPT),
           "--cpu", "--check", "--bench", "--mode", mode, "--timeout", "120", *TINY, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"check {mode} on 2 x cpu: .*: PASS", r.stdout), r.stdout
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| ") and ("devices" in ln or "1 device" in ln)]
    setups = [tuple(c.strip() for c in ln.strip("|").split("|")[:2]) for ln in rows]
    assert setups == [("mytorch", "1 device"), ("mytorch", f"2 devices ({mode})"),
                      ("stock", "1 device"), ("stock", f"2 devices ({mode})")], r.stdout
    for ln in rows:
        ms, tps = (float(c) for c in ln.strip("|").split("|")[2:4])
        assert ms > 0 and tps > 0, ln
    assert "mytorch vs stock tokens/s: " in r.stdout, r.stdout
