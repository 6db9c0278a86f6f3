"""mytorch::flash_attn_fp8: the attention forward on float8_e4m3fn q, k, v.

- `flash_attn_fp8`, the public wrapper: flash-attn's (batch, seqlen, heads, head_dim) layout
  with FlashAttention-3's descales, a float32 per (batch, kv head) or one per tensor, such
  that x = x_fp8 * descale. The output is bfloat16.
- `quantize_fp8`: q, k, v in any float dtype to float8 with their descales, per head or per
  tensor, optionally after a random Hadamard rotation of q and k ("incoherent processing":
  q R (k R)^T = q k^T for an orthogonal R, and the rotation spreads an outlier channel over
  every channel, so one scale fits the whole head).
- The kernels: on a Hopper GPU the Gluon kernel of mytorch_ext/triton/flash_attn_hopper.py
  (scores from float8 wgmma, P rounded to float8 for the second GEMM, as FlashAttention-3
  does). Elsewhere (the CPU, the mytorch device's host memory, other GPUs, or a Triton
  without Gluon) the op dequantizes and runs mytorch::flash_attn (float32 on the CPU,
  bfloat16 on CUDA), so every door gives the same op; only the Hopper one is faster than
  bfloat16 attention.
- check_inputs names the argument and what is accepted, on every device and in the fake
  kernel. It reads shapes and dtypes only (no host synchronization).

Forward only: float8 training would need its own backward; the op has no autograd kernel.
"""
from __future__ import annotations

import functools
import math

import torch

from .attention import resolve_softmax_scale

OP = "mytorch::flash_attn_fp8"
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest finite float8_e4m3fn
HEAD_DIMS = (64, 128)  # those of the Hopper kernel, accepted on every device alike


def _desc(name, t):
    return f"{name} {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"


def _err(msg, cls=ValueError):
    raise cls(f"{OP}: {msg}")


def check_inputs(q, k, v, q_descale, k_descale, v_descale, softcap=0.0):
    """Raises on anything the kernels do not accept; returns the descales as one float32
    (3, batch, heads_k) tensor, q's, k's and v's (shapes only: no value is read)."""
    qkv = f"{_desc('q', q)}, {_desc('k', k)}, {_desc('v', v)}"
    if not (q.dtype == k.dtype == v.dtype == FP8):
        hint = (" (float16/bfloat16/float32 inputs go to mytorch::flash_attn, or through "
                "quantize_fp8 first)" if FP8 not in (q.dtype, k.dtype, v.dtype) else "")
        _err(f"expected q, k, v all float8_e4m3fn, got {qkv}{hint}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        _err(f"expected q, k, v of layout (batch, seqlen, heads, head_dim), got {qkv}")
    if not (q.device == k.device == v.device):
        _err(f"expected q, k, v on one device, got {q.device}, {k.device}, {v.device}", RuntimeError)
    batch, _, hq, d = q.shape
    if k.shape != v.shape or k.shape[0] != batch or k.shape[3] != d:
        _err(f"expected k and v of one shape (batch, seqlen_k, heads_k, head_dim) matching q's "
             f"batch and head_dim, got {qkv}")
    hk = k.shape[2]
    if hk == 0 or hq % hk:
        _err(f"expected q's heads a multiple of k's (GQA/MQA), got {qkv}")
    if d not in HEAD_DIMS:
        _err(f"head_dim {d} is not supported in float8; accepted: "
             f"{', '.join(map(str, HEAD_DIMS))} (got {qkv})")
    if not softcap >= 0.0:
        _err(f"expected softcap >= 0, got {softcap}")
    given = {"q_descale": q_descale, "k_descale": k_descale, "v_descale": v_descale}
    missing = [n for n, t in given.items() if t is None]
    if missing:
        _err(f"float8 inputs need q_descale, k_descale and v_descale (float32, ({batch}, {hk}) "
             f"= (batch, heads_k) or one element; x = x_fp8 * descale), got none for "
             f"{', '.join(missing)}")
    out = []
    for name, t in given.items():
        if t.dtype != torch.float32 or not (t.numel() == 1 or tuple(t.shape) == (batch, hk)):
            _err(f"expected {name} float32 of shape ({batch}, {hk}) (batch, heads_k) or one "
                 f"element, got {_desc(name, t)}")
        if t.device != q.device:
            _err(f"expected {name} on {q.device}, got {t.device}", RuntimeError)
        out.append(t.reshape(-1, 1).expand(batch, hk) if t.numel() == 1 else t)
    return torch.stack(out)


def _dequantize(x, descale, dtype):
    """x_fp8 * descale in dtype; descale (batch, heads_k) covers heads_k // heads of x's."""
    b, n, h, d = x.shape
    hk = descale.shape[1]
    y = x.to(torch.float32).view(b, n, hk, h // hk, d) * descale.view(b, 1, hk, 1, 1)
    return y.view(b, n, h, d).to(dtype)


def _dequantized(q, k, v, descale, softmax_scale, causal, window_left, window_right, softcap,
                 dtype):
    """The op through mytorch::flash_attn on dequantized inputs."""
    out, lse = torch.ops.mytorch.flash_attn(
        _dequantize(q, descale[0], dtype), _dequantize(k, descale[1], dtype),
        _dequantize(v, descale[2], dtype), 0.0, softmax_scale, causal, window_left,
        window_right, softcap)
    return out.to(torch.bfloat16), lse


def _kernel(q, k, v, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
            causal=False, window_left=-1, window_right=-1, softcap=0.0):
    descale = check_inputs(q, k, v, q_descale, k_descale, v_descale, softcap)
    if q.is_cuda:
        from ..triton.flash_attn import flash_attn_fp8_forward

        served = flash_attn_fp8_forward(
            q, k, v, descale, softmax_scale=resolve_softmax_scale(softmax_scale, q.shape[-1]),
            causal=causal, window_left=window_left, window_right=window_right, softcap=softcap)
        if served is not None:
            return served
    dtype = torch.bfloat16 if q.is_cuda else torch.float32
    return _dequantized(q, k, v, descale, softmax_scale, causal, window_left, window_right,
                        softcap, dtype)


def _fake(q, k, v, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
          causal=False, window_left=-1, window_right=-1, softcap=0.0):
    check_inputs(q, k, v, q_descale, k_descale, v_descale, softcap)
    b, n, h, d = q.shape
    return (q.new_empty((b, n, h, d), dtype=torch.bfloat16),
            q.new_empty((b, h, n), dtype=torch.float32))


torch.library.register_fake(OP, _fake)
for _key in ("cpu", "cuda", "PrivateUse1"):
    torch.library.register_kernel(OP, _key, _kernel)


# ------------------------------------------------------------------------ public API

def flash_attn_fp8(q, k, v, q_descale=None, k_descale=None, v_descale=None, *,
                   softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                   return_softmax_lse=False):
    """Attention of float8_e4m3fn q, k, v (batch, seqlen, heads, head_dim), head_dim 64 or
    128, GQA/MQA, causal (bottom-right), windows and softcap as flash_attn. q_descale,
    k_descale, v_descale: float32 (batch, heads_k) or one element, x = x_fp8 * descale
    (quantize_fp8 makes all six). Returns out bfloat16 (batch, seqlen_q, heads, head_dim), or
    (out, lse) with return_softmax_lse (float32, (batch, heads, seqlen_q)). No backward."""
    wl, wr = (int(w) for w in window_size)
    out, lse = torch.ops.mytorch.flash_attn_fp8(q, k, v, q_descale, k_descale, v_descale,
                                                softmax_scale, causal, wl, wr, float(softcap))
    return (out, lse) if return_softmax_lse else out


@functools.lru_cache(maxsize=16)
def _rotation(d, seed, device):
    """diag(random signs) H / sqrt(d): an orthogonal d x d float32 matrix (d a power of 2)."""
    h = torch.ones(1, 1)
    while h.shape[0] < d:  # Sylvester's construction
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (d,), generator=g).float() * 2 - 1
    return (signs[:, None] * h / math.sqrt(d)).to(device)


def _quantize(x, per_head, heads_k):
    """(x as float8, descale (batch, heads_k) or (1, 1)); a group of x's heads shares one."""
    b, n, h, d = x.shape
    x = x.to(torch.float32)
    if x.numel() == 0:  # an empty sequence: nothing to scale
        amax = x.new_zeros((b, heads_k) if per_head else (1, 1))
    elif per_head:
        amax = x.abs().view(b, n, heads_k, h // heads_k, d).amax(dim=(1, 3, 4))
    else:
        amax = x.abs().amax().view(1, 1)
    descale = amax.clamp_min(1e-12) / FP8_MAX
    scale = descale.expand(b, heads_k).repeat_interleave(h // heads_k, 1).view(b, 1, h, 1)
    return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), descale.contiguous()


def quantize_fp8(q, k, v, *, per_head=True, hadamard=False, seed=0):
    """q, k, v (batch, seqlen, heads, head_dim) in a float dtype to the arguments of
    flash_attn_fp8: (q8, k8, v8, q_descale, k_descale, v_descale). per_head: one descale per
    (batch, kv head), else one per tensor (shape (1, 1)). hadamard: rotate q and k by the
    same random orthogonal Hadamard matrix first (seeded by seed), which leaves q k^T and so
    the attention unchanged but evens out their channels before rounding. Everything stays
    on the device (no host synchronization)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.shape != v.shape:
        raise ValueError(f"mytorch_ext.quantize_fp8: expected q, k, v (batch, seqlen, heads, "
                         f"head_dim) with k and v of one shape, got {_desc('q', q)}, "
                         f"{_desc('k', k)}, {_desc('v', v)}")
    d = q.shape[-1]
    if hadamard:
        if d & (d - 1):
            raise ValueError(f"mytorch_ext.quantize_fp8: hadamard needs a power-of-two head_dim, "
                             f"got {d}")
        r = _rotation(d, seed, q.device)
        q = q.to(torch.float32) @ r
        k = k.to(torch.float32) @ r
    hk = k.shape[2]
    (q8, qd), (k8, kd), (v8, vd) = (_quantize(t, per_head, hk) for t in (q, k, v))
    return q8, k8, v8, qd, kd, vd


__all__ = ["flash_attn_fp8", "quantize_fp8", "check_inputs"]
