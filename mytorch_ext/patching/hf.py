"""Hugging Face transformers integration.

- `register_hf()` adds a "mytorch" attention implementation (AttentionInterface) with the
  mask builder of "sdpa" (a boolean (batch, 1, q, kv) mask, or none when causal alone does),
  so that `AutoModelForCausalLM.from_config(cfg, attn_implementation="mytorch")` works.
- `apply_to(model)` swaps, per module instance, what has a mytorch kernel: RMSNorm and
  LayerNorm modules, GPT-2's tanh GELU, and the attention implementation. `revert(model)`
  (or the returned handle's `.revert()`) restores the originals.

Calls that the mytorch kernels do not support (dtype, device, mismatched parameter dtype,
softcap, a position bias) run the original code; patch_stats() counts both ways.
"""
from __future__ import annotations

import types

import torch

from ..ops.attention import _draw_seed
from .aten import STATS, _has_kernel, _sdpa_ok, refresh_kernels

NAME = "mytorch"
_my = torch.ops.mytorch


def _count(op, used):
    STATS[op]["mytorch" if used else "fallthrough"] += 1


# ------------------------------------------------------------------------------ attention

def mytorch_attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                              scaling=None, is_causal=None, **kwargs):
    """transformers attention function: (batch, heads, seqlen, head_dim) in,
    (batch, seqlen, heads, head_dim) out, as sdpa_attention_forward."""
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    n_q, n_k = query.shape[2], key.shape[2]
    is_causal = bool(n_q > 1 and attention_mask is None and is_causal)
    mask = attention_mask
    if mask is not None and mask.dim() == 4:
        mask = mask[:, :, :, :n_k]
    plain = (kwargs.get("softcap") is None and kwargs.get("position_bias") is None
             and kwargs.get("cache") is None and not kwargs.get("output_attentions", False)
             and (not is_causal or n_q == n_k))
    if plain and _sdpa_ok(query, key, value, mask, dropout, is_causal, scaling, True):
        _count("hf_attention", True)
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))
        if mask is not None:
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
        seed = _draw_seed(q.device) if dropout > 0.0 else 0
        out, _ = _my.flash_attn(q, k, v, dropout, scaling, is_causal, -1, -1, 0.0, None, None,
                                None, 0, 0, seed, mask, False)
        return out, None
    _count("hf_attention", False)
    return _fallback[0](module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, is_causal=is_causal, **kwargs)


_registered = []
_fallback = []  # transformers' sdpa_attention_forward, set by register_hf()


def register_hf() -> None:
    """Register attn_implementation="mytorch" with transformers (idempotent)."""
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    _fallback.append(sdpa_attention_forward)

    AttentionInterface.register(NAME, mytorch_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered.append(True)


# -------------------------------------------------------------------------- module swaps

def _rms_forward(self, hidden_states):
    w = self.weight
    x = hidden_states
    dev = x.device.type
    if dev in ("cpu", "cuda") and _has_kernel("rms_norm", dev) and w.dtype == x.dtype:
        _count("rms_norm", True)
        return _my.rms_norm(x, [x.shape[-1]], w, float(self.variance_epsilon))[0]
    _count("rms_norm", False)
    return type(self).forward(self, hidden_states)


def _layer_norm_forward(self, x):
    dev = x.device.type
    params = [p for p in (self.weight, self.bias) if p is not None]
    if (dev in ("cpu", "cuda") and _has_kernel("layer_norm", dev)
            and all(p.dtype == x.dtype for p in params)):
        _count("layer_norm", True)
        return _my.layer_norm(x, list(self.normalized_shape), self.weight, self.bias, self.eps)[0]
    _count("layer_norm", False)
    return type(self).forward(self, x)


def _gelu_tanh_forward(self, x):
    dev = x.device.type
    if dev in ("cpu", "cuda") and _has_kernel("gelu", dev):
        _count("gelu", True)
        return _my.gelu(x, "tanh")
    _count("gelu", False)
    return type(self).forward(self, x)


def _swap_for(module):
    """The forward that replaces `module`'s, or None (also where the device of the module's
    parameters has no kernel for it: a swap would only add a call that falls through)."""
    cls = type(module).__name__
    w = getattr(module, "weight", None)
    dev = w.device.type if isinstance(w, torch.Tensor) else None
    if isinstance(module, torch.nn.LayerNorm):
        return _layer_norm_forward if dev is None or _has_kernel("layer_norm", dev) else None
    if cls.endswith("RMSNorm") and hasattr(module, "variance_epsilon") and w is not None:
        return _rms_forward if _has_kernel("rms_norm", dev) else None
    if cls in ("NewGELUActivation", "GELUTanh", "PytorchGELUTanh", "GELUPytorchTanh"):
        return _gelu_tanh_forward
    return None


class Handle:
    """What apply_to changed; `.revert()` restores it."""

    def __init__(self, model):
        self.model = model
        self.modules = []     # modules whose forward is overridden on the instance
        self.attn = None      # previous attn_implementation, when it was changed

    def revert(self):
        for m in self.modules:
            m.__dict__.pop("forward", None)
        self.modules = []
        if self.attn is not None:
            self.model.set_attn_implementation(self.attn)
            self.attn = None
        if getattr(self.model, "_mytorch_handle", None) is self:
            del self.model._mytorch_handle

    def __repr__(self):
        return f"mytorch_ext.apply_to handle: {len(self.modules)} modules, attention {'swapped' if self.attn else 'unchanged'}"


def apply_to(model: torch.nn.Module, *, norms=True, activations=True, attention=True) -> Handle:
    """Swap norms, GELU and attention of a Llama / Qwen2 / Mistral / GPT-2 style model for
    mytorch kernels. Applying twice is harmless (the first swap is reverted first)."""
    if getattr(model, "_mytorch_handle", None) is not None:
        model._mytorch_handle.revert()
    refresh_kernels()
    h = Handle(model)
    for m in model.modules():
        fwd = _swap_for(m)
        if fwd is None or "forward" in m.__dict__:
            continue
        is_norm = fwd in (_rms_forward, _layer_norm_forward)
        if (is_norm and not norms) or (fwd is _gelu_tanh_forward and not activations):
            continue
        m.forward = types.MethodType(fwd, m)
        h.modules.append(m)
    cfg = getattr(model, "config", None)
    if attention and cfg is not None and hasattr(model, "set_attn_implementation"):
        prev = cfg._attn_implementation
        if prev != NAME:
            register_hf()
            model.set_attn_implementation(NAME)
            h.attn = prev
    model._mytorch_handle = h
    return h


def revert(model: torch.nn.Module) -> None:
    """Undo apply_to(model)."""
    h = getattr(model, "_mytorch_handle", None)
    if h is not None:
        h.revert()


__all__ = ["register_hf", "apply_to", "revert", "mytorch_attention_forward", "Handle"]
