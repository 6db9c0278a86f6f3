"""Runtime ISA dispatch of the CPU kernels (csrc/kernels/cpu/isa.h): every compiled variant
computes the same results, the choice can be capped, and no wider-ISA code can reach a
baseline caller (checked on the objects of the in-tree build)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

import mytorch_ext  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
OBJ_DIR = ROOT / "build" / "temp" / "csrc"
ISAS = ["base", "avx2", "avx512"]


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _runs_here(isa: str) -> bool:
    flags = _cpu_flags()
    need = {"base": set(), "avx2": {"avx2", "fma", "f16c", "bmi2"},
            "avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}}[isa]
    return need <= flags


CHECK = r"""
import torch, mytorch_ext
import torch.nn.functional as F
isa = mytorch_ext.build_info()["cpu_isa"]
print(isa)
torch.manual_seed(0)
for dt, tol in [(torch.float32, 1e-4), (torch.float64, 1e-10), (torch.bfloat16, 2e-2)]:
    a, b = torch.randn(67, 45, dtype=dt), torch.randn(45, 83, dtype=dt)
    ref = (a.double() @ b.double()).to(dt)
    torch.testing.assert_close(torch.ops.mytorch.mm(a, b), ref, rtol=tol, atol=tol * 10)
q, k, v = (torch.randn(2, 37, 3, 40, requires_grad=True) for _ in range(3))
out, lse = torch.ops.mytorch.flash_attn(q, k, v, causal=True)
ref = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
torch.testing.assert_close(out, ref.transpose(1, 2), rtol=1e-4, atol=1e-5)
out.sum().backward()
g = [t.grad.clone() for t in (q, k, v)]
for t in (q, k, v):
    t.grad = None
ref.sum().backward()
for a, t in zip(g, (q, k, v)):
    torch.testing.assert_close(a, t.grad, rtol=1e-4, atol=1e-4)
x = torch.randn(37, 301) * 4
torch.testing.assert_close(torch.ops.mytorch.softmax(x, -1), torch.softmax(x, -1))
torch.testing.assert_close(torch.ops.mytorch.log_softmax(x, -1), torch.log_softmax(x, -1))
torch.testing.assert_close(torch.ops.mytorch.gelu(x), F.gelu(x))
torch.testing.assert_close(torch.ops.mytorch.sigmoid(x), torch.sigmoid(x))
for op in ("exp", "tanh"):
    torch.testing.assert_close(getattr(torch.ops.mytorch, op)(x / 4), getattr(torch, op)(x / 4))
w, b = torch.randn(301), torch.randn(301)
torch.testing.assert_close(torch.ops.mytorch.layer_norm(x, [301], w, b, 1e-5)[0],
                           F.layer_norm(x, [301], w, b, 1e-5), rtol=1e-4, atol=1e-5)
img = torch.randn(2, 5, 17, 18)
y, idx = torch.ops.mytorch.max_pool2d(img, [2, 2], [2, 2], [0, 0], [1, 1], False)
ry, ridx = F.max_pool2d(img, 2, 2, return_indices=True)
torch.testing.assert_close(y, ry)
assert torch.equal(idx, ridx)
print("OK")
"""


@pytest.mark.parametrize("isa", ISAS)
def test_each_variant_matches_the_reference(isa):
    if not _runs_here(isa):
        pytest.skip(f"this CPU cannot run the {isa} variant")
    env = {**os.environ, "MYTORCH_CPU_ISA": isa}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    chosen, ok = r.stdout.split("\n")[:2]
    assert chosen.startswith(isa + " (gemm ") and ok == "OK", r.stdout


def test_bad_cap_is_a_clear_error():
    env = {**os.environ, "MYTORCH_CPU_ISA": "sse9"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", "import torch, mytorch_ext; mytorch_ext.build_info()"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "MYTORCH_CPU_ISA must be base, avx2 or avx512, got 'sse9'" in r.stderr


# An instruction that uses the AVX registers or the VEX/EVEX encoding (v-prefixed mnemonics).
_WIDE = re.compile(r"\t(v[a-z0-9]+)\s.*%[xyz]mm|%[yz]mm|%k[0-7]")


def _wide_functions(obj: pathlib.Path) -> set:
    """Functions of an object file holding AVX/AVX-512 instructions (demangled names)."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    found, current = set(), None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            current = m.group(1)
        elif current and _WIDE.search(line):
            found.add(current)
    return found


def _objects():
    if not OBJ_DIR.is_dir():
        pytest.skip("no in-tree build objects (build/temp)")
    if mytorch_ext.build_info()["cpu_flags"] != "-march=x86-64-v2":
        pytest.skip("built with other CPU flags than the portable default")
    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed")
    objs = sorted(p for p in OBJ_DIR.rglob("*.o") if "kernels/cuda" not in str(p))
    assert objs
    return objs


def test_wide_code_only_in_the_variant_namespaces():
    objs = _objects()
    variants = [o for o in objs if o.parent.name == "isa"]
    assert {o.stem for o in variants} >= {f"{k}_{i}" for i in ("avx2", "avx512") for k in
                                          ("gemm", "attention", "vec_math", "unary_contig", "norm", "pool")}
    leaks = {}
    for o in objs:
        if o.parent.name == "isa":
            ns = "isa_" + o.stem.rsplit("_", 1)[1] + "_cpu"
            bad = {f for f in _wide_functions(o) if ns not in f}
        else:
            bad = _wide_functions(o)
        if bad:
            leaks[str(o.relative_to(OBJ_DIR))] = sorted(bad)[:5]
    assert leaks == {}, f"wide-ISA code a baseline caller could reach: {leaks}"
