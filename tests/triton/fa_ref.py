"""Shared pieces of the flash_attn tests: where they run, the float64 reference, the SDPA
peer whose error ours is held to, and the test-local copy of the ops.

Without a GPU the Triton kernels run on CPU tensors under TRITON_INTERPRET=1 (set here,
before the kernels are imported). The CPU key of mytorch::flash_attn belongs to the C++
kernel, so the CPU runs go through a test-local copy of the two ops, `mytorch_fa_test::`,
defined from the very same schemas and registered by mytorch_ext.ops.attention.register
with the very same fake kernels, autograd and Triton launchers, on the CPU key.
"""
from __future__ import annotations

import math
import os

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ["TRITON_INTERPRET"] = "1"
DEVICE = "cuda" if GPU else "cpu"

import mytorch_ext  # noqa: E402
from mytorch_ext.ops import attention  # noqa: E402

TEST_NS = "mytorch_fa_test"
_lib = None


def setup_ops():
    """The op namespace the tests call: mytorch on a GPU, the test-local copy on CPU.

    tests/triton/conftest.py binds mytorch_ext's public wrappers (flash_attn,
    scaled_dot_product_attention, ...) to it only while a test of this folder runs, so that
    other test files keep the real ops.
    """
    global _lib
    if GPU:
        return torch.ops.mytorch
    if _lib is None:
        import triton  # noqa: F401
        import mytorch_ext.triton.flash_attn as fa

        assert "Interpreted" in type(fa._fwd_kernel).__name__, \
            "the Triton kernels were imported before TRITON_INTERPRET=1 was set"
        _lib = torch.library.Library(TEST_NS, "DEF")
        for op in ("flash_attn", "flash_attn_backward"):
            _lib.define(str(getattr(torch.ops.mytorch, op).default._schema).split("::", 1)[1])
        attention.register(TEST_NS, ("cpu",), lib=_lib)
    return getattr(torch.ops, TEST_NS)


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def bias_and_keep(n_q, n_k, *, causal=False, wl=-1, wr=-1, slopes=None, device="cpu"):
    """(float64 additive bias (H or 1, n_q, n_k) or None, boolean keep (n_q, n_k)) for the
    geometric options; bottom-right aligned."""
    i = torch.arange(n_q, device=device)[:, None]
    j = torch.arange(n_k, device=device)[None, :]
    diag = n_k - n_q
    keep = torch.ones(n_q, n_k, dtype=torch.bool, device=device)
    if causal:
        wr = 0
    if wr >= 0:
        keep &= j <= i + diag + wr
    if wl >= 0:
        keep &= j >= i + diag - wl
    bias = None
    if slopes is not None:
        bias = -slopes.double().reshape(-1, 1, 1) * (i + diag - j).abs().double()
    return bias, keep


def reference(q, k, v, *, scale=None, causal=False, wl=-1, wr=-1, softcap=0.0, slopes=None,
              mask=None, drop_keep=None, p=0.0, upcast=True):
    """Attention in (B, N, H, D) layout. upcast: float64 throughout; else the low-precision
    emulation flash-attn's tests use (scores fp32, P rounded to the input dtype)."""
    dt = torch.float64 if upcast else torch.float32
    B, n_q, H, D = q.shape
    n_k, hk = k.shape[1], k.shape[2]
    scale = scale if scale is not None else 1.0 / math.sqrt(D)
    k = k.repeat_interleave(H // hk, 2)
    v = v.repeat_interleave(H // hk, 2)
    s = torch.einsum("bmhd,bnhd->bhmn", q.to(dt), k.to(dt)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None and slopes.dim() == 2:
        i = torch.arange(n_q, device=q.device)[:, None]
        j = torch.arange(n_k, device=q.device)[None, :]
        s = s - slopes.to(dt)[:, :, None, None] * (i + n_k - n_q - j).abs().to(dt)
        slopes = None
    bias, keep = bias_and_keep(n_q, n_k, causal=causal, wl=wl, wr=wr, slopes=slopes,
                               device=q.device)
    if bias is not None:
        s = s + bias.to(dt)
    s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.to(dt)
    lse = torch.logsumexp(s, -1)
    pm = torch.exp(s - lse[..., None])
    pm = torch.where(torch.isneginf(lse)[..., None], 0.0, pm)
    if drop_keep is not None:
        pm = pm * drop_keep / (1 - p)
    if not upcast:
        pm = pm.to(q.dtype).to(dt)
    out = torch.einsum("bhmn,bnhd->bmhd", pm, v.to(dt))
    lse = torch.where(torch.isneginf(lse), float("inf"), lse)
    return (out if upcast else out.to(q.dtype)), lse.float()


def sdpa_peer(q, k, v, *, scale=None, causal=False, wl=-1, wr=-1, slopes=None, mask=None):
    """SDPA on the same low-precision inputs, (B, N, H, D) in and out. The flash backend when
    the options allow it (no bias; causal only with n_q == n_k), else SDPA with an additive
    float bias (efficient/math backends on GPU, the flash kernel on CPU)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, n_q, H, D = q.shape
    n_k, hk = k.shape[1], k.shape[2]
    if hk != H:
        k = k.repeat_interleave(H // hk, 2)
        v = v.repeat_interleave(H // hk, 2)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    plain = slopes is None and mask is None and wl < 0 and wr < 0 and (not causal or n_q == n_k)
    if plain:
        backends = [SDPBackend.FLASH_ATTENTION] if q.is_cuda else [SDPBackend.FLASH_ATTENTION,
                                                                   SDPBackend.MATH]
        with sdpa_kernel(backends):
            out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                                   scale=scale)
        return out.transpose(1, 2)
    if slopes is not None and slopes.dim() == 2:
        i = torch.arange(n_q, device=q.device)[:, None]
        j = torch.arange(n_k, device=q.device)[None, :]
        bias = -slopes.double()[:, :, None, None] * (i + n_k - n_q - j).abs().double()
        slopes = None
    else:
        bias = None
    b2, keep = bias_and_keep(n_q, n_k, causal=causal, wl=wl, wr=wr, slopes=slopes,
                             device=q.device)
    full = torch.zeros(n_q, n_k, dtype=torch.float64, device=q.device)
    for extra in (bias, b2):
        if extra is not None:
            full = full + extra
    full = full.masked_fill(~keep, float("-inf"))
    if mask is not None:
        full = full.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else full + mask
    full = full.to(q.dtype)
    if full.dim() == 3:
        full = full[None]
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=full,
                                                           scale=scale)
    return out.transpose(1, 2)
