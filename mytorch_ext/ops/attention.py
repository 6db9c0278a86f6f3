"""mytorch::flash_attn and mytorch::flash_attn_backward: Python side.

- CUDA kernels: the Triton launchers of mytorch_ext/triton/flash_attn.py, registered for
  the CUDA key from here in a build without the CUDA sources (whose C++ launcher runs the
  same kernels); the CPU and mytorch device keys belong to the C++ OpenMP kernel.
- Fake kernels, autograd (the backward is its own op), CUDA autocast.
- Input validation with shapes and dtypes in the message.
- Public wrappers: flash_attn (flash-attn's flash_attn_func signature), flash_attn_varlen,
  scaled_dot_product_attention (torch's SDPA signature, (B, H, N, D) layout).

`register(namespace, kernel_keys)` attaches all of this to any library holding the same two
schemas, and `bind(ops)` makes the public wrappers over such a library; the tests use both on
a test-local copy of the ops whose CPU key runs the Triton kernels under TRITON_INTERPRET=1
(the real ops' CPU key stays the C++ kernel's).
"""
from __future__ import annotations

import types

import torch

from .. import _C
from .._info import require_triton
from ._autograd import register_autograd

OP = "mytorch::flash_attn"
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # the Triton kernels (float32: IEEE dots)
_CPU_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)  # the OpenMP kernel


def resolve_softmax_scale(softmax_scale, head_dim):
    """softmax_scale, or the default 1/sqrt(head_dim) when it is None: the one rule of every
    layer (csrc/kernels/attention_checks.h), for Python code that needs the number itself."""
    return _C._attention.softmax_scale(softmax_scale, head_dim)


def _accepted_dtypes(triton):
    if triton:
        return _DTYPES, "float16, bfloat16 or float32"
    return _CPU_DTYPES, "float16, bfloat16, float32 or float64"


def _desc(name, t):
    return f"{name} {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"


class _Lazy:
    """Text built only when an error message formats it (checks run on every call)."""

    def __init__(self, make):
        self.make = make

    def __format__(self, spec):
        return format(self.make(), spec)


def _err(op, msg, cls=ValueError):
    raise cls(f"{op}: {msg}")


def check_inputs(q, k, v, *, dropout_p=0.0, softcap=0.0, alibi_slopes=None, cu_seqlens_q=None,
                 cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, attn_mask=None,
                 window_left=-1, window_right=-1, op=OP, check_values=True, seed_tensor=None,
                 triton=None):
    """Raise ValueError / RuntimeError naming shapes and dtypes when the inputs are not valid.

    The C++ kernels (csrc/kernels/attention_checks.h) raise the same messages. Per kernel:
    the Triton kernels take head_dim a multiple of 8 in [8, 256], the same for q, k, v; the
    OpenMP kernel any head_dim in [1, 256], v's possibly different from q's. triton: whether
    the Triton kernels' rules apply; None: the real ops' split (Triton on CUDA)."""
    if triton is None:
        triton = q.device.type == "cuda"
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        _err(op, "expected both cu_seqlens_q and cu_seqlens_k or neither")
    want = 3 if varlen else 4
    layout = "(total_tokens, heads, head_dim)" if varlen else "(batch, seqlen, heads, head_dim)"
    qkv = _Lazy(lambda: f"{_desc('q', q)}, {_desc('k', k)}, {_desc('v', v)}")
    for t in (q, k, v):
        if t.dim() != want:
            _err(op, f"expected q, k, v of layout {layout}, got {qkv}")
    accepted, accepted_names = _accepted_dtypes(triton)
    for t in (q, k, v):
        if t.dtype not in accepted:
            hint = (" (float8_e4m3fn inputs go to mytorch::flash_attn_fp8)"
                    if torch.float8_e4m3fn in (q.dtype, k.dtype, v.dtype) else "")
            _err(op, f"expected q, k, v of dtype {accepted_names}, got {qkv}{hint}")
    if not (q.dtype == k.dtype == v.dtype):
        _err(op, f"expected q, k, v of one dtype, got {qkv}")
    if not (q.device == k.device == v.device):
        _err(op, f"expected q, k, v on one device, got q on {q.device}, k on {k.device}, "
                 f"v on {v.device}", RuntimeError)
    if not varlen and not (q.shape[0] == k.shape[0] == v.shape[0]):
        _err(op, f"expected q, k, v with the same batch size, got {qkv}")
    d, dv = q.shape[-1], v.shape[-1]
    if triton:
        if k.shape != v.shape:
            _err(op, f"expected k and v of the same shape, got {qkv}")
        if k.shape[-1] != d:
            _err(op, f"expected q, k, v with the same head_dim, got {qkv}")
        if d % 8 != 0 or d > 256 or d == 0:
            _err(op, f"expected head_dim a multiple of 8 in [8, 256], got {d} ({qkv})")
    else:
        if k.shape[:-1] != v.shape[:-1]:
            _err(op, f"expected k and v of the same shape but for head_dim, got {qkv}")
        if k.shape[-1] != d:
            _err(op, f"expected q and k with the same head_dim, got {qkv}")
        if not 1 <= d <= 256:
            _err(op, f"expected head_dim in [1, 256], got {d} ({qkv})")
        if not 1 <= dv <= 256:
            _err(op, f"expected the head_dim of v in [1, 256], got {dv} ({qkv})")
    hq, hk = q.shape[-2], k.shape[-2]
    if hk == 0 or hq % hk != 0:
        _err(op, f"expected the heads of k, v to divide the heads of q, got {hq} and {hk} ({qkv})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            _err(op, f"expected {name} with a contiguous last dim, got strides {tuple(t.stride())}")
    if not 0.0 <= dropout_p < 1.0:
        _err(op, f"expected dropout_p in [0, 1), got {dropout_p}")
    if softcap < 0.0:
        _err(op, f"expected softcap >= 0, got {softcap}")
    if alibi_slopes is not None:
        ok_shape = alibi_slopes.shape in ((hq,), (cu_seqlens_q.numel() - 1 if varlen else q.shape[0], hq))
        if alibi_slopes.dtype != torch.float32 or not ok_shape:
            _err(op, f"expected alibi_slopes float32 of shape ({hq},) or (batch, {hq}), got "
                     f"{_desc('alibi_slopes', alibi_slopes)}")
        if alibi_slopes.device != q.device:
            _err(op, f"expected alibi_slopes on {q.device}, got {alibi_slopes.device}", RuntimeError)
        if alibi_slopes.stride(-1) != 1:
            _err(op, "expected alibi_slopes with a contiguous last dim")
    if attn_mask is not None:
        if varlen:
            _err(op, "attn_mask is not supported with cu_seqlens")
        if attn_mask.device != q.device:
            _err(op, f"expected attn_mask on {q.device}, got {attn_mask.device}", RuntimeError)
        mask_dtypes = (torch.bool, torch.float16, torch.bfloat16, torch.float32)
        if not triton:
            mask_dtypes += (torch.float64,)
        if attn_mask.dtype not in mask_dtypes:
            _err(op, f"expected attn_mask of dtype bool or float, got {_desc('attn_mask', attn_mask)}")
        full = (q.shape[0], hq, q.shape[1], k.shape[1])
        trailing = zip(reversed(attn_mask.shape), reversed(full))
        if attn_mask.dim() > 4 or any(m not in (1, f) for m, f in trailing):
            _err(op, f"expected attn_mask broadcastable to {full}, got {_desc('attn_mask', attn_mask)}")
    if seed_tensor is not None:
        if seed_tensor.dtype != torch.int64 or seed_tensor.numel() != 1:
            _err(op, f"expected seed_tensor a one-element int64 tensor, got {_desc('seed_tensor', seed_tensor)}")
        if seed_tensor.device != q.device:
            _err(op, f"expected seed_tensor on {q.device}, got {seed_tensor.device}", RuntimeError)
    if varlen:
        _check_cu_seqlens(op, q, "q", cu_seqlens_q, max_seqlen_q, check_values)
        _check_cu_seqlens(op, k, "k", cu_seqlens_k, max_seqlen_k, check_values)
        if cu_seqlens_q.numel() != cu_seqlens_k.numel():
            _err(op, f"expected cu_seqlens_q and cu_seqlens_k of one length, got "
                     f"{cu_seqlens_q.numel()} and {cu_seqlens_k.numel()}")


def _check_cu_seqlens(op, x, name, cu, max_seqlen, check_values):
    cname = f"cu_seqlens_{name}"
    if cu.dtype != torch.int32 or cu.dim() != 1 or cu.numel() < 1:
        _err(op, f"expected {cname} a 1-D int32 tensor of batch+1 offsets, got {_desc(cname, cu)}")
    if cu.device != x.device:
        _err(op, f"expected {cname} on {x.device}, got {cu.device}", RuntimeError)
    if max_seqlen < 0:
        _err(op, f"expected max_seqlen_{name} >= 0, got {max_seqlen}")
    if not check_values or isinstance(cu, torch._subclasses.FakeTensor):
        return
    if cu.is_cuda:  # checked on the stream, with no host read
        if not _native("CUDA"):  # else the C++ launcher, the only caller here, checked them
            _assert_cu_seqlens_async(op, x, name, cu, max_seqlen)
        return
    vals = cu.tolist()
    lens = [b - a for a, b in zip(vals[:-1], vals[1:])]
    if vals[0] != 0 or any(n < 0 for n in lens):
        _err(op, f"expected {cname} to start at 0 and never decrease, got {vals}")
    if vals[-1] != x.shape[0]:
        _err(op, f"expected {cname}[-1] == {name}.shape[0], got {vals[-1]} and {x.shape[0]} "
                 f"({_desc(name, x)})")
    if lens and max(lens) > max_seqlen:
        _err(op, f"expected max_seqlen_{name} >= the longest sequence, got {max_seqlen} < {max(lens)}")


def _assert_cu_seqlens_async(op, x, name, cu, max_seqlen):
    """check_cu_seqlens_on_device of the C++ launcher (csrc/kernels/cuda/attention_checks.cu)
    in ATen ops, for a build without the CUDA sources: the same conditions, one device-side
    assert."""
    c = cu.long()
    lens = c[1:] - c[:-1]
    ok = (c[0] == 0) & (c[-1] == x.shape[0])
    if lens.numel():
        ok = ok & (lens.min() >= 0) & (lens.max() <= max_seqlen)
    torch._assert_async(ok, f"{op}: expected cu_seqlens_{name} to start at 0, never decrease and end at "
                            f"{name}.shape[0] = {x.shape[0]}, with no sequence longer than "
                            f"max_seqlen_{name} = {max_seqlen}")


# ----------------------------------------------------------------------------- kernels

def _fwd_kernel(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_left=-1,
                window_right=-1, softcap=0.0, alibi_slopes=None, cu_seqlens_q=None,
                cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, seed=0, attn_mask=None,
                deterministic=False, seed_tensor=None):
    require_triton(OP)
    check_inputs(q, k, v, dropout_p=dropout_p, softcap=softcap, alibi_slopes=alibi_slopes,
                 cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                 max_seqlen_k=max_seqlen_k, attn_mask=attn_mask, seed_tensor=seed_tensor, triton=True)
    from ..triton.flash_attn import flash_attn_forward

    return flash_attn_forward(
        q, k, v, softmax_scale=resolve_softmax_scale(softmax_scale, q.shape[-1]), causal=causal,
        window_left=window_left,
        window_right=window_right, softcap=softcap, alibi_slopes=alibi_slopes,
        dropout_p=dropout_p, seed=seed, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, attn_mask=attn_mask,
        seed_tensor=seed_tensor)


def _bwd_kernel(grad_out, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_left,
                window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                max_seqlen_k, seed, deterministic, attn_mask=None, seed_tensor=None):
    require_triton(f"{OP}_backward")
    check_inputs(q, k, v, dropout_p=dropout_p, softcap=softcap, alibi_slopes=alibi_slopes,
                 cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                 max_seqlen_k=max_seqlen_k, attn_mask=attn_mask, op=f"{OP}_backward",
                 check_values=False, seed_tensor=seed_tensor, triton=True)
    _check_bwd_shapes(grad_out, q, v, out, lse, cu_seqlens_q)
    from ..triton.flash_attn import flash_attn_backward

    return flash_attn_backward(
        grad_out, q, k, v, out, lse, softmax_scale=softmax_scale, causal=causal,
        window_left=window_left, window_right=window_right, softcap=softcap,
        alibi_slopes=alibi_slopes, dropout_p=dropout_p, seed=seed, cu_seqlens_q=cu_seqlens_q,
        cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        deterministic=deterministic, attn_mask=attn_mask, seed_tensor=seed_tensor)


def _lse_shape(q, cu_seqlens_q):
    if cu_seqlens_q is not None:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


def _out_shape(q, v):
    return tuple(q.shape[:-1]) + (v.shape[-1],)


def _check_bwd_shapes(grad_out, q, v, out, lse, cu_seqlens_q):
    op = f"{OP}_backward"
    shape = _out_shape(q, v)
    if grad_out.shape != shape or out.shape != shape:
        _err(op, f"expected grad_out and out of shape {shape} (q's with the head_dim of v), got "
                 f"{_desc('grad_out', grad_out)}, {_desc('out', out)}")
    if grad_out.dtype != q.dtype or out.dtype != q.dtype:
        _err(op, f"expected grad_out and out of q's dtype, got {_desc('grad_out', grad_out)}, "
                 f"{_desc('out', out)}, {_desc('q', q)}")
    if tuple(lse.shape) != _lse_shape(q, cu_seqlens_q) or lse.dtype != torch.float32:
        _err(op, f"expected lse float32 of shape {_lse_shape(q, cu_seqlens_q)}, got {_desc('lse', lse)}")


def _make_fwd_fake(triton_devices):
    """The forward's fake kernel, checking with the rules of the kernel that serves each
    device: Triton on `triton_devices`, OpenMP elsewhere."""
    def fake(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_left=-1,
             window_right=-1, softcap=0.0, alibi_slopes=None, cu_seqlens_q=None,
             cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, seed=0, attn_mask=None,
             deterministic=False, seed_tensor=None):
        check_inputs(q, k, v, dropout_p=dropout_p, softcap=softcap, alibi_slopes=alibi_slopes,
                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                     max_seqlen_k=max_seqlen_k, attn_mask=attn_mask, check_values=False,
                     seed_tensor=seed_tensor, triton=q.device.type in triton_devices)
        out = q.new_empty(_out_shape(q, v))
        lse = q.new_empty(_lse_shape(q, cu_seqlens_q), dtype=torch.float32)
        return out, lse
    return fake


def _bwd_fake(grad_out, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_left,
              window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k, seed, deterministic, attn_mask=None, seed_tensor=None):
    _check_bwd_shapes(grad_out, q, v, out, lse, cu_seqlens_q)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


# ---------------------------------------------------------------------------- autograd

_ARGS = ("dropout_p", "softmax_scale", "causal", "window_left", "window_right", "softcap",
         "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "seed",
         "attn_mask", "deterministic", "seed_tensor")


def _setup_context(ctx, inputs, output):
    q, k, v, *rest = inputs
    a = dict(zip(_ARGS, rest))
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, a.get("alibi_slopes"), a.get("cu_seqlens_q"),
                          a.get("cu_seqlens_k"), a.get("attn_mask"), a.get("seed_tensor"))
    ctx.args = a
    # lse carries no gradient: not materializing its (unused) zero grad saves a launch per call
    ctx.set_materialize_grads(False)


def _make_backward(bwd_op):
    def backward(ctx, grad_out, grad_lse):
        q, k, v, out, lse, slopes, cu_q, cu_k, mask, seed_tensor = ctx.saved_tensors
        if grad_out is None:  # only lse was used downstream
            grad_out = torch.zeros_like(out)
        a = ctx.args
        scale = resolve_softmax_scale(a["softmax_scale"], q.shape[-1])
        dq, dk, dv = bwd_op(
            grad_out, q, k, v, out, lse, a["dropout_p"], scale, a["causal"], a["window_left"],
            a["window_right"], a["softcap"], slopes, cu_q, cu_k, a["max_seqlen_q"], a["max_seqlen_k"],
            a["seed"], a["deterministic"], mask, seed_tensor)
        return (dq, dk, dv) + (None,) * len(_ARGS)
    return backward


def _autocast(fwd_op):
    def kernel(q, k, v, *args):
        dtype = torch.get_autocast_dtype("cuda")
        with torch._C._ExcludeDispatchKeyGuard(
                torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)):
            cast = [t.to(dtype) if t.dtype == torch.float32 else t for t in (q, k, v)]
            return fwd_op(*cast, *args)
    return kernel


def register(namespace="mytorch", kernel_keys=("cuda",), lib=None):
    """Fake kernels, autograd, autocast and the Triton kernels (for the device types
    `kernel_keys`) of `namespace`'s two ops.

    The real ops have their CUDA kernels and autograd in C++ (csrc/kernels/cuda/attention.cpp,
    csrc/autograd/attention.cpp); these Python ones serve a build without them and the tests'
    copy of the ops."""
    fwd, bwd = f"{namespace}::flash_attn", f"{namespace}::flash_attn_backward"
    ops = getattr(torch.ops, namespace)
    torch.library.register_fake(fwd, _make_fwd_fake({"cuda", *kernel_keys}), lib=lib)
    torch.library.register_fake(bwd, _bwd_fake, lib=lib)
    for key in kernel_keys:
        torch.library.register_kernel(fwd, key, _fwd_kernel, lib=lib)
        torch.library.register_kernel(bwd, key, _bwd_kernel, lib=lib)
    _lib = lib or _LIBS.setdefault(namespace, torch.library.Library(namespace, "IMPL"))
    register_autograd(fwd, _make_backward(ops.flash_attn_backward.default), _setup_context, lib=_lib)
    _lib.impl("flash_attn", _autocast(ops.flash_attn.default), "AutocastCUDA")


_LIBS: dict = {}


def _native(key):
    return torch._C._dispatch_has_kernel_for_dispatch_key("mytorch::flash_attn", key)


# The CPU and mytorch-device kernels are C++ (csrc/kernels/cpu/attention.cpp); CUDA's are the
# C++ launcher of the Triton kernels, or these Python ones in a build without the CUDA sources.
register("mytorch", () if _native("CUDA") else ("cuda",))


# ------------------------------------------------------------------------ public wrappers

def _draw_seed(device):
    """A dropout seed: a one-element int64 tensor on `device`, from its default generator.

    A tensor rather than a number, so that a compiled graph or a CUDA graph draws a new seed
    every step (a number would be baked in); the kernels read it themselves."""
    return torch.randint(0, 1 << 62, (1,), dtype=torch.int64, device=device)


def _window(window_size):
    wl, wr = window_size
    return int(wl), int(wr)


def bind(ops):
    """The public wrappers over `ops`, a torch.ops namespace holding flash_attn's two schemas
    (torch.ops.mytorch, or a copy registered with register()): flash_attn, flash_attn_varlen
    and scaled_dot_product_attention, as a namespace. mytorch_ext's are bind(torch.ops.mytorch).

    They call the op with positional arguments, in the schema's order: keyword arguments add
    about 3 us to a call (the binding matches them against the schema)."""

    def flash_attn(q, k, v, *, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                   softcap=0.0, alibi_slopes=None, deterministic=False, return_lse=False,
                   return_attn_probs=False):
        """Attention over (batch, seqlen, heads, head_dim) tensors, as flash_attn.flash_attn_func.

        k, v may have fewer heads than q (dividing them). causal is bottom-right aligned when
        seqlen_q != seqlen_k. Returns out, or (out, lse) with return_lse (lse float32,
        (batch, heads, seqlen_q); no gradient flows through lse). return_attn_probs (testing
        only, as flash-attn's): (out, lse, S_dmask), S_dmask the attention probabilities
        (batch, heads, seqlen_q, seqlen_k), float32, negative where dropout dropped the entry.
        """
        wl, wr = _window(window_size)
        seed = _draw_seed(q.device) if dropout_p > 0.0 else None
        args = (dropout_p, softmax_scale, causal, wl, wr, softcap, alibi_slopes)
        out, lse = ops.flash_attn(q, k, v, *args, None, None, 0, 0, 0, None, deterministic, seed)
        if return_attn_probs:
            return out, lse, _attn_probs(ops, q, k, v, args, (None, None, 0, 0), seed)
        return (out, lse) if return_lse else out

    def flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                          dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                          softcap=0.0, alibi_slopes=None, deterministic=False, return_lse=False,
                          return_attn_probs=False):
        """Packed sequences: q (total_q, heads, head_dim), k/v (total_k, heads_kv, head_dim),
        cu_seqlens int32 offsets (batch+1,), as flash_attn.flash_attn_varlen_func.
        return_attn_probs: (out, lse, S_dmask (batch, heads, max_seqlen_q, max_seqlen_k)), as
        flash_attn."""
        wl, wr = _window(window_size)
        seed = _draw_seed(q.device) if dropout_p > 0.0 else None
        args = (dropout_p, softmax_scale, causal, wl, wr, softcap, alibi_slopes)
        varlen = (cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k))
        out, lse = ops.flash_attn(q, k, v, *args, *varlen, 0, None, deterministic, seed)
        if return_attn_probs:
            return out, lse, _attn_probs(ops, q, k, v, args, varlen, seed)
        return (out, lse) if return_lse else out

    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None, enable_gqa=False):
        """torch.nn.functional.scaled_dot_product_attention over (batch, heads, seqlen, head_dim).

        is_causal is top-left aligned, as in SDPA. attn_mask: bool (True = attend) or additive
        float, broadcastable to (batch, heads, L, S); it gets no gradient. A query row that may
        attend to no key gives 0 (SDPA's math backend gives NaN there).
        """
        op = "mytorch.scaled_dot_product_attention"
        if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
            _err(op, f"expected 4-D (batch, heads, seqlen, head_dim) tensors, got "
                     f"{_desc('query', query)}, {_desc('key', key)}, {_desc('value', value)}")
        if query.shape[1] != key.shape[1] and not enable_gqa:
            _err(op, f"query has {query.shape[1]} heads and key {key.shape[1]}: pass enable_gqa=True")
        if attn_mask is not None and is_causal:
            _err(op, "expected attn_mask or is_causal, not both")
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))
        n_q, n_k = q.shape[1], k.shape[1]
        causal, wr = False, -1
        if is_causal:
            if n_q <= n_k:  # top-left: keys past n_q are never attended
                k, v = k[:, :n_q], v[:, :n_q]
                causal = True
            else:  # top-left = bottom-right shifted right by n_q - n_k
                wr = n_q - n_k
        mask = None
        if attn_mask is not None:
            if attn_mask.requires_grad and torch.is_grad_enabled():
                _err(op, "attn_mask gets no gradient here; detach it")
            if attn_mask.dim() > 4:
                _err(op, f"expected attn_mask with at most 4 dims, got {_desc('attn_mask', attn_mask)}")
            mask = attn_mask.reshape((1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape))
        seed = _draw_seed(q.device) if dropout_p > 0.0 else None
        out, _ = ops.flash_attn(q, k, v, dropout_p, scale, causal, -1, wr, 0.0, None, None, None, 0, 0,
                                0, mask, False, seed)
        return out.transpose(1, 2)

    return types.SimpleNamespace(flash_attn=flash_attn, flash_attn_varlen=flash_attn_varlen,
                                 scaled_dot_product_attention=scaled_dot_product_attention)


def _attn_probs(ops, q, k, v, args, varlen, seed):
    """The probabilities the kernels used, read back through the kernels themselves: with v
    one-hot over a chunk of head_dim keys, out holds those columns of P (dropout off) and of
    the dropped, rescaled P (the same seed: the same mask). Entries dropout removed come back
    negative (flash-attn's S_dmask convention). 2 * ceil(seqlen_k / head_dim) forward calls.
    args: the call's (dropout_p, softmax_scale, causal, window_left, window_right, softcap,
    alibi_slopes); varlen: its (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)."""
    dropout_p, scale, causal, wl, wr, softcap, slopes = args
    cu_q, cu_k, max_q, max_k = varlen
    d, n_k = q.shape[-1], k.shape[-3]
    parts_p, parts_kept = [], []
    with torch.no_grad():
        qd, kd = q.detach(), k.detach()
        for c0 in range(0, n_k, d):
            width = min(d, n_k - c0)
            onehot = torch.zeros(v.shape[:-1] + (d,), dtype=v.dtype, device=v.device)
            eye = torch.eye(width, d, dtype=v.dtype, device=v.device)
            onehot[..., c0:c0 + width, :, :] = eye[:, None, :] if v.dim() == 3 else eye[None, :, None, :]
            for p_, keep in ((0.0, parts_p), (dropout_p, parts_kept)):
                o, _ = ops.flash_attn(qd, kd, onehot, dropout_p=p_, softmax_scale=scale, causal=causal,
                                      window_left=wl, window_right=wr, softcap=softcap, alibi_slopes=slopes,
                                      cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q,
                                      max_seqlen_k=max_k, seed_tensor=seed if p_ > 0 else None)
                keep.append(o[..., :width].float())
    p = torch.cat(parts_p, -1)
    kept = torch.cat(parts_kept, -1) if dropout_p > 0 else p
    s = torch.where((kept != 0) | (p == 0), p, -p)  # (.., seqlen_q, heads, seqlen_k)
    if cu_q is None:
        return s.permute(0, 2, 1, 3).contiguous()
    # varlen: (batch, heads, max_seqlen_q, max_seqlen_k), zero past each sequence
    b = cu_q.numel() - 1
    out = s.new_zeros(b, q.shape[1], max_q, max_k)
    for i, (a, e, ka, ke) in enumerate(zip(cu_q[:-1].tolist(), cu_q[1:].tolist(), cu_k[:-1].tolist(),
                                           cu_k[1:].tolist())):
        out[i, :, :e - a, :ke - ka] = s[a:e, :, ka:ke].permute(1, 0, 2)
    return out


_wrappers = bind(torch.ops.mytorch)
flash_attn = _wrappers.flash_attn
flash_attn_varlen = _wrappers.flash_attn_varlen
scaled_dot_product_attention = _wrappers.scaled_dot_product_attention


__all__ = ["flash_attn", "flash_attn_varlen", "scaled_dot_product_attention", "check_inputs",
           "register", "bind", "resolve_softmax_scale"]
