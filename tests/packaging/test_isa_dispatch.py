"""Runtime ISA dispatch of the CPU kernels (csrc/kernels/cpu/isa.h): every compiled variant
computes the reference's results, the variants of the reduce, binary elementwise, loss and
optimizer kernels agree with each other, the choice can be capped, and no wider-ISA code can
reach a baseline caller (checked on the objects of the in-tree build)."""
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
mt = torch.ops.mytorch
big = torch.randn(301, 259)
torch.testing.assert_close(mt.sum(big), big.sum(), rtol=1e-5, atol=1e-3)
torch.testing.assert_close(mt.sum(big, [0]), big.sum(0), rtol=1e-5, atol=1e-4)
torch.testing.assert_close(mt.var(big, [1]), big.var(1), rtol=1e-5, atol=1e-5)
torch.testing.assert_close(mt.amax(big, [1]), big.amax(1))
torch.testing.assert_close(mt.add(big, big[0], alpha=2), big + 2 * big[0])
torch.testing.assert_close(mt.mul(big, big.t().contiguous().t()), big * big)
t = torch.randint(0, 259, (301,))
torch.testing.assert_close(mt.cross_entropy(big, t, None, 1, -100, 0.1),
                           F.cross_entropy(big, t, label_smoothing=0.1), rtol=1e-5, atol=1e-5)
p, g = big.clone(), torch.randn(301, 259)
m, v, step = torch.zeros_like(p), torch.zeros_like(p), torch.ones(1)
rp = p.clone()
mt.adam_step_([p], [g], [m], [v], [], [step], 1e-2)
ropt = torch.optim.Adam([rp], lr=1e-2, foreach=False)
rp.grad = g
ropt.step()
torch.testing.assert_close(p, rp, rtol=1e-5, atol=1e-6)
print("OK")
"""

# Outputs of the newly dispatched families, saved by each variant and compared across them.
# Sizes leave vector tails (odd lengths) and take each reduce path (inner, split over threads,
# outer, strided) and the contiguous, scalar, broadcast and strided binary loops.
OUTPUTS = r"""
import sys, torch, mytorch_ext
import torch.nn.functional as F
mt = torch.ops.mytorch
torch.manual_seed(0)
out = {"isa": mytorch_ext.build_info()["cpu_isa"]}
x = torch.randn(67, 1003)
xl = torch.randn(3, 70001)
for dt in (torch.float32, torch.float64, torch.bfloat16):
    a = x.to(dt)
    n = str(dt).split(".")[1]
    out[f"sum all {n}"] = mt.sum(a)
    out[f"sum inner {n}"] = mt.sum(a, [1])
    out[f"sum outer {n}"] = mt.sum(a, [0])
    out[f"sum strided {n}"] = mt.sum(a.t(), [1])
    out[f"mean {n}"] = mt.mean(a, [1])
    out[f"var {n}"] = mt.var(a, [0])
    out[f"std {n}"] = mt.std(a, [1])
    out[f"logsumexp {n}"] = mt.logsumexp(a, [1])
    out[f"amax {n}"] = mt.amax(a, [1])
    out[f"max_dim {n}"] = mt.max_dim(a, 0)
    out[f"argmin {n}"] = mt.argmin(a, 1)
    out[f"sum split {n}"] = mt.sum(xl.to(dt), [1])
    b = torch.randn(67, 1003).to(dt)
    out[f"add {n}"] = mt.add(a, b)
    out[f"add_alpha {n}"] = mt.add(a, b, alpha=3)
    out[f"sub {n}"] = mt.sub(a, b)
    out[f"mul {n}"] = mt.mul(a, b)
    out[f"div {n}"] = mt.div(a, b)
    out[f"maximum {n}"] = mt.maximum(a, b)
    out[f"mul scalar {n}"] = mt.mul(a, torch.tensor(1.7, dtype=dt))
    out[f"add row {n}"] = mt.add(a, b[0])
    out[f"add col {n}"] = mt.add(a, b[:, :1])
    out[f"mul strided {n}"] = mt.mul(a.t(), b.t())
    out[f"lt {n}"] = mt.lt(a, b)
    out[f"pow {n}"] = mt.pow(a.abs(), b)
    out[f"sigmoid_backward {n}"] = mt.sigmoid_backward(b, a.sigmoid())
    out[f"silu_backward {n}"] = mt.silu_backward(b, a)
    out[f"gelu_backward {n}"] = mt.gelu_backward(b, a)
    out[f"threshold_backward {n}"] = mt.threshold_backward(b, a, 0.1)
    t = torch.randint(0, 1003, (67,))
    out[f"cross_entropy {n}"] = mt.cross_entropy(a, t, None, 1, -100, 0.1)
    g = torch.randn(()).to(dt)
    out[f"cross_entropy_backward {n}"] = mt.cross_entropy_backward(g, a, t, None, 1, -100, 0.1)
    lp = torch.log_softmax(a.float(), 1).to(dt)
    out[f"nll_loss {n}"] = mt.nll_loss(lp, t, None, 0, -100)[0]
    out[f"mse_loss {n}"] = mt.mse_loss(a, b, 2)
    out[f"mse_loss_backward {n}"] = mt.mse_loss_backward(g, a, b, 1)
    p, gr = a.clone(), b.clone()
    m, v, vm, step = torch.zeros_like(p), torch.zeros_like(p), torch.zeros_like(p), torch.full((1,), 3.0)
    mt.adam_step_([p], [gr], [m], [v], [vm], [step], 1e-2, 0.9, 0.999, 0.1, 1e-8, True, False, True)
    out[f"adamw {n}"] = (p, m, v, vm)
    p, buf = a.clone(), torch.randn(67, 1003).to(dt)
    mt.sgd_step_([p], [gr], [buf], 1e-2, 0.9, 0.1, 1e-4, True)
    out[f"sgd {n}"] = (p, buf)
torch.save(out, sys.argv[1])
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


# Results every variant must give bit for bit: one rounding per element, or a selection.
# The others may differ in the last bits: sums run in another order with each vector width
# (reductions, the losses' row sums), the AVX2 / AVX-512 copies fuse a * b + c into one FMA
# (add with alpha, the optimizer steps, the loss gradients), and the activation backwards
# take the vectorized exp / erf of vec_math.h, which differ by ISA.
_EXACT = ("add", "sub", "mul", "div", "maximum", "lt", "threshold_backward", "amax", "max_dim", "argmin")


def test_variants_of_the_reduce_binary_loss_optim_families_agree(tmp_path):
    """Every variant this CPU runs gives the baseline's results on the reduce, binary
    elementwise, loss and optimizer kernels: bit for bit (_EXACT), or within the dtype's
    rounding where the summation order, FMA or the vector math differs with the ISA."""
    runs = [isa for isa in ISAS if _runs_here(isa)]
    if len(runs) < 2:
        pytest.skip("this CPU runs only the baseline variant")
    results = {}
    for isa in runs:
        env = {**os.environ, "MYTORCH_CPU_ISA": isa}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
        path = tmp_path / f"{isa}.pt"
        r = subprocess.run([sys.executable, "-c", OUTPUTS, str(path)], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        results[isa] = torch.load(path)
        assert results[isa].pop("isa").startswith(isa + " (gemm "), isa
    base = results["base"]
    assert len(base) == 3 * 35
    for isa in runs[1:]:
        assert results[isa].keys() == base.keys()
        for name, ref in base.items():
            got = results[isa][name]
            pairs = list(zip(got, ref)) if isinstance(ref, tuple) else [(got, ref)]
            for g, r in pairs:
                if name.split(" ")[0] in _EXACT:
                    assert torch.equal(g, r), f"{isa} vs base: {name} differs"
                else:
                    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 1e-2}[r.dtype]
                    torch.testing.assert_close(g, r, rtol=tol, atol=tol, msg=f"{isa} vs base: {name}")


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
                                          ("gemm", "attention", "vec_math", "unary_contig", "norm", "pool",
                                           "reduce", "elementwise_binary", "loss", "optim")}
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
