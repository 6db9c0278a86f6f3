"""The bfloat16 CPU attention forward on AMX tiles (csrc/kernels/cpu/isa/attention_amx.cpp).

On a CPU with AMX-BF16 (and an OS that grants the tile state), covered calls (bfloat16,
head dims multiples of 32 up to 256, no softcap / ALiBi / mask / dropout / varlen) run on
the tiles: checked against float64 over GQA/MQA, causal (also with fewer keys than queries,
rows with no key), windows, odd lengths, key counts across the 256-key blocks and strided
inputs, within the error bound of P's bfloat16 rounding; and against the other kernel of
the same build (MYTORCH_CPU_AMX=0, in a subprocess; MYTORCH_CPU_ISA below avx512 also turns the tiles off). The backward takes the AMX forward's
lse. Elsewhere the module reports that AMX is off, and the calls take the other kernel
(tests/ops/test_attention_cpu.py).
"""
import json
import os
import subprocess
import sys

import pytest
import torch

import mytorch_ext
from helpers import attention_reference

AMX = mytorch_ext._C._attention.cpu_amx()
pytestmark = pytest.mark.skipif(not AMX, reason="no AMX-BF16 on this CPU (or the OS refuses the tile state)")

CASES = [  # (batch, n_q, n_k, heads, heads_k, head_dim, causal, window_left, window_right)
    (2, 77, 100, 4, 2, 64, False, -1, -1),
    (1, 33, 33, 2, 2, 128, True, -1, -1),
    (1, 100, 40, 2, 1, 64, True, -1, -1),   # more queries than keys: leading rows see none
    (2, 64, 600, 2, 2, 256, False, 5, 3),
    (1, 1, 300, 8, 1, 64, False, -1, -1),   # a decode step, MQA
    (1, 300, 529, 2, 2, 32, True, -1, -1),  # keys across three 256-key blocks
    (1, 70, 70, 3, 1, 96, False, 20, -1),
]


def _case(b, nq, nk, h, hk, d, strided=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    if strided:  # (B, H, N, D) storage seen as (B, N, H, D)
        return tuple(torch.randn(b, hh, n, d, generator=g).bfloat16().transpose(1, 2)
                     for n, hh in ((nq, h), (nk, hk), (nk, hk)))
    return tuple(torch.randn(b, n, hh, d, generator=g).bfloat16() for n, hh in ((nq, h), (nk, hk), (nk, hk)))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("strided", [False, True])
def test_against_float64(case, strided):
    b, nq, nk, h, hk, d, causal, wl, wr = case
    q, k, v = _case(b, nq, nk, h, hk, d, strided)
    out, lse = torch.ops.mytorch.flash_attn(q, k, v, 0.0, None, causal, wl, wr)
    o_ref, lse_ref, p_abs_v = attention_reference(q, k, v, d ** -0.5, causal, wl, wr)
    # P is rounded to bfloat16 (2^-9 relative) before P V, the output to bfloat16 (2^-9)
    bound = p_abs_v * 2 ** -8 + o_ref.abs() * 2 ** -8 + 1e-6
    assert bool(((out.double() - o_ref).abs() <= bound).all())
    fin = torch.isfinite(lse_ref)
    torch.testing.assert_close(lse.double()[fin], lse_ref[fin], atol=1e-5, rtol=1e-6)
    assert bool((lse[~fin] == float("inf")).all()) and bool((out.transpose(1, 2)[~fin] == 0).all())


_OTHER = """
import json, sys, torch, mytorch_ext
assert not mytorch_ext._C._attention.cpu_amx()
q, k, v = torch.load(sys.argv[1])
out, lse = torch.ops.mytorch.flash_attn(q, k, v, 0.0, None, True)
torch.save((out, lse), sys.argv[1])
"""


def test_matches_the_other_kernel(tmp_path):
    q, k, v = _case(2, 130, 300, 4, 2, 128)
    out, lse = torch.ops.mytorch.flash_attn(q, k, v, 0.0, None, True)
    path = str(tmp_path / "io.pt")
    torch.save((q, k, v), path)
    env = dict(os.environ, MYTORCH_CPU_AMX="0")
    subprocess.run([sys.executable, "-c", _OTHER, path], env=env, check=True)
    out2, lse2 = torch.load(path)
    torch.testing.assert_close(lse, lse2, atol=1e-5, rtol=1e-6)
    torch.testing.assert_close(out.float(), out2.float(), atol=2e-2, rtol=2e-2)


def test_backward_takes_its_lse():
    q, k, v = (t.requires_grad_() for t in _case(1, 64, 96, 2, 1, 64))
    out = mytorch_ext.flash_attn(q, k, v, causal=True)
    g = torch.randn_like(out)
    out.backward(g)
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o_ref, _, _ = attention_reference(*ref, 64 ** -0.5, True)
    o_ref.backward(g.double())
    for t, r in zip((q, k, v), ref):
        torch.testing.assert_close(t.grad.double(), r.grad, atol=3e-2, rtol=3e-2)


def test_uncovered_calls_take_the_other_kernel():
    """softcap and head dims off the 32 grid stay correct (the AVX-512 kernel serves them)."""
    q, k, v = _case(1, 40, 50, 2, 2, 48)
    out, _ = torch.ops.mytorch.flash_attn(q, k, v, 0.0, None, True)
    o_ref, _, _ = attention_reference(q, k, v, 48 ** -0.5, True)
    torch.testing.assert_close(out.double(), o_ref, atol=1e-2, rtol=1e-2)
    q, k, v = _case(1, 40, 50, 2, 2, 64)
    out, _ = torch.ops.mytorch.flash_attn(q, k, v, 0.0, None, True, -1, -1, 5.0)
    o_ref, _, _ = attention_reference(q, k, v, 64 ** -0.5, True, softcap=5.0)
    torch.testing.assert_close(out.double(), o_ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("env", [{"MYTORCH_CPU_AMX": "0"}, {"MYTORCH_CPU_ISA": "avx2"}])
def test_switched_off_by_the_environment(env):
    r = subprocess.run([sys.executable, "-c", "import json, mytorch_ext; "
                        "print(json.dumps(mytorch_ext._C._attention.cpu_amx()))"],
                       env=dict(os.environ, **env), check=True, capture_output=True, text=True)
    assert json.loads(r.stdout.strip().splitlines()[-1]) is False


def test_build_info_says_so():
    assert mytorch_ext.build_info()["cpu_amx_attention"] is True
