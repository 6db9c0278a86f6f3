"""Compiles the Gluon Hopper attention kernels for sm90 on a machine without a GPU.

Run as a script (tests/triton/test_hopper_compile.py runs it in a process of its own): a
stand-in CUDA driver reports an sm90 target, every Triton launch compiles and returns without
launching, and the real launchers (flash_attn_hopper.forward / forward_fp8,
flash_attn_hopper_bwd.backward_kv / backward_q) run on CPU tensors, so their descriptors,
strides and compile-time constants are the ones a GPU call builds. Triton's compile goes down
to a cubin (ptxas included), so an API or layout that this Triton rejects fails here. Prints
one JSON line: {"compiled": {kernel name: count}, "skip": reason or null}.

    python tests/triton/hopper_compile.py --spills   # also each kernel's registers and spills
                                                     # (ptxas -v on its PTX, Triton's ptxas)
    python tests/triton/hopper_compile.py --spills --bwd FILE   # another version of
        # flash_attn_hopper_bwd.py (a variant to A/B with benchmarks/hopper_ab.py): its
        # backward kernels only, in place of the package's
"""
import json
import os
import subprocess
import sys
import tempfile
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def spill_report(kernels):
    """ptxas -v's register and spill lines for each compiled kernel, with Triton's own ptxas."""
    from triton.backends.nvidia.compiler import get_ptxas

    try:
        ptxas = get_ptxas(90).path
    except (TypeError, AttributeError) as e:
        print(f"--spills: this Triton's get_ptxas differs from Triton 3.8's ({e}); no report")
        return
    for label, kernel in kernels:
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(kernel.asm["ptx"])
        try:
            res = subprocess.run([ptxas, "-v", "--gpu-name=sm_90a", f.name, "-o", os.devnull],
                                 capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        info = [ln.split(":", 1)[-1].strip() for ln in res.stderr.splitlines()
                if "spill" in ln or "Used" in ln]
        print(f"{label:60s} {'; '.join(info)}")


def main(kept=None, bwd_file=None):
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    import triton

    try:
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.driver import CudaDriver
        from triton.runtime import driver
        from triton.runtime.jit import JITFunction
    except ImportError as e:
        return {"compiled": {}, "skip": f"this Triton has no CUDA backend ({e})"}

    class Sm90Driver(CudaDriver):
        """Reports an H100-class target; never touches a GPU."""

        def __init__(self):  # no CUDA library to load
            self.utils = types.SimpleNamespace(get_device_properties=lambda device: {
                "max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536,
                "warpSize": 32, "sm_clock_rate": 1, "mem_clock_rate": 1, "mem_bus_width": 1})

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_device_capability(self, device=0):
            return (9, 0)

        def get_active_torch_device(self):
            return torch.device("cpu")

        @staticmethod
        def is_active():
            return True

    compiled = {}
    run = JITFunction.run

    def compile_only(self, *args, grid, warmup, **kwargs):
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        if not kernel.asm.get("cubin"):
            raise RuntimeError(f"{self.fn.__name__}: no cubin")
        compiled[self.fn.__name__] = compiled.get(self.fn.__name__, 0) + 1
        if kept is not None:
            consts = ", ".join(f"{k}={kwargs[k]}" for k in ("HEAD_DIM", "LEFT", "RIGHT", "SOFTCAP")
                               if k in kwargs)
            kept.append((f"{self.fn.__name__} ({consts})", kernel))
        return kernel

    sys.path.insert(0, ROOT)
    # the kernel modules without mytorch_ext's package import (no C++ extension needed)
    for name in ("mytorch_ext", "mytorch_ext.triton"):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(ROOT, *name.split("."))]
        sys.modules[name] = mod
    try:
        from mytorch_ext.triton import flash_attn_hopper as fwd
        if bwd_file:
            import importlib.util
            spec = importlib.util.spec_from_file_location("mytorch_ext.triton.flash_attn_hopper_bwd",
                                                          bwd_file)
            bwd = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = bwd
            spec.loader.exec_module(bwd)
        else:
            from mytorch_ext.triton import flash_attn_hopper_bwd as bwd
    except ImportError as e:
        return {"compiled": {}, "skip": f"Gluon is not importable here ({e})"}

    driver.set_active(Sm90Driver())
    JITFunction.run = compile_only
    fwd._num_sms = lambda device: 132
    B, N, H, HK = 1, 256, 4, 2

    def t(*shape, dtype=torch.bfloat16):
        return torch.zeros(*shape, dtype=dtype)

    for D in (64, 128):
        q, k, v = t(B, N, H, D), t(B, N, HK, D), t(B, N, HK, D)
        out, lse = t(B, N, H, D), t(B, H, N, dtype=torch.float32)
        kw = dict(softmax_scale=D ** -0.5, group=H // HK, left=False, right=True, wl=-1, wr=0)
        if bwd_file:
            _compile_backward(bwd, q, k, v, out, lse, t, kw)
            continue
        masks = ((False, False, -1, -1), (False, True, -1, 0), (True, True, 64, 0))
        for left, right, wl, wr in masks:  # none, causal, a window
            fwd.forward(q, k, v, out, lse, softmax_scale=D ** -0.5, softcap=0.0, group=H // HK,
                        left=left, right=right, wl=wl, wr=wr)
        fwd.forward(q, k, v, out, lse, softmax_scale=D ** -0.5, softcap=30.0, group=H // HK,
                    left=False, right=True, wl=-1, wr=0)
        # past SHORT_SEQLEN: head dim 64's three-warpgroup tiles, head dim 128's causal blocks
        n = fwd.SHORT_SEQLEN + 64
        ql, kl, vl, ol = t(B, n, H, D), t(B, n, HK, D), t(B, n, HK, D), t(B, n, H, D)
        for right in (False, True):
            fwd.forward(ql, kl, vl, ol, t(B, H, n, dtype=torch.float32), softmax_scale=D ** -0.5,
                        softcap=0.0, group=H // HK, left=False, right=right, wl=-1,
                        wr=0 if right else -1)
        fwd.forward_fp8(*[x.to(torch.float8_e4m3fn) for x in (ql, kl, vl)],
                        t(3, B, HK, dtype=torch.float32), ol, t(B, H, n, dtype=torch.float32),
                        softmax_scale=D ** -0.5, softcap=0.0, group=H // HK, left=False,
                        right=True, wl=-1, wr=0)
        _compile_backward(bwd, q, k, v, out, lse, t, kw)
        f8 = [x.to(torch.float8_e4m3fn) for x in (q, k, v)]
        fwd.forward_fp8(*f8, t(3, B, HK, dtype=torch.float32), out, lse, softmax_scale=D ** -0.5,
                        softcap=0.0, group=H // HK, left=False, right=True, wl=-1, wr=0)
    return {"compiled": compiled, "skip": None, "triton": triton.__version__}


def _compile_backward(bwd, q, k, v, out, lse, t, kw):
    bwd.backward_kv(q, k, v, out, lse, lse, t(*k.shape), t(*v.shape), **kw)
    # without a mask: head dim 64's three-warpgroup dK/dV kernel
    bwd.backward_kv(q, k, v, out, lse, lse, t(*k.shape), t(*v.shape), **dict(kw, right=False, wr=-1))
    if q.shape[-1] in bwd._DQ_BLOCKS:
        bwd.backward_q(q, k, v, out, lse, lse, t(*q.shape), **kw)


if __name__ == "__main__":
    kernels = [] if "--spills" in sys.argv else None
    bwd_file = sys.argv[sys.argv.index("--bwd") + 1] if "--bwd" in sys.argv else None
    print(json.dumps(main(kernels, bwd_file)))
    if kernels:
        spill_report(kernels)
