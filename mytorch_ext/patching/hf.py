"""Hugging Face transformers integration.

- `register_hf()` adds a "mytorch" attention implementation (AttentionInterface) with the
  mask builder of "sdpa" (a boolean (batch, 1, q, kv) mask, or none when causal alone does),
  so that `AutoModelForCausalLM.from_config(cfg, attn_implementation="mytorch")` works.
- `apply_to(model)` swaps what has a mytorch kernel: per module instance, RMSNorm and
  LayerNorm modules, GPT-2's tanh GELU, Llama-style SwiGLU MLPs and the causal-LM loss
  (fused cross-entropy); the attention implementation; and, per modeling module, the
  Llama-style `apply_rotary_pos_emb`. `revert(model)` (or the returned handle's `.revert()`)
  restores the originals; `revert_all()` reverts every handle still live and puts back every
  swapped `apply_rotary_pos_emb` (for tests and error paths: a handle dropped unreverted leaves
  the module global swapped); `original_rope(module)` is a modeling module's own function.

"Llama-style" means the same code as transformers' Llama (LlamaMLP.forward,
apply_rotary_pos_emb and rotate_half of modeling_llama), compared by bytecode: Qwen2 and
Mistral share it; variants (interleaved or partial rotary, another MLP) keep their code.

Calls that the mytorch kernels do not support (dtype, device, mismatched parameter dtype,
softcap, a position bias, a batched RoPE table) run the original code; patch_stats() counts
both ways, in eager execution (not inside torch.compile, where counting would put Python
state in the graph).
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import types
import weakref

import torch
import torch.nn.functional as F

from .._after_import import after_import, cancel
from .._eager_calls import call as _call
from ..ops import loss as _loss
from . import hf_kvcache
from .aten import STATS, _fused_ok, _has_kernel, _ready_attention, _tally, refresh_kernels

NAME = "mytorch"
_hf_attention = torch.ops.mytorch_patching.hf_attention


def _count(op, used):
    """One call for patch_stats(); eager only (see aten._tally: no graph state)."""
    _tally(STATS[op], "mytorch" if used else "fallthrough")


# ------------------------------------------------------------------------------ attention

def mytorch_attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                              scaling=None, is_causal=None, **kwargs):
    """transformers attention function: (batch, heads, seqlen, head_dim) in,
    (batch, seqlen, heads, head_dim) out, as sdpa_attention_forward."""
    _ready_attention(query)  # before any route, so that a later compiled call finds it made
    out = hf_kvcache.attention(module, query, key, value, attention_mask, dropout, scaling, kwargs)
    if out is not None:  # generate(): the kvcache op reads the cache's filled part only
        return out, None
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    n_q, n_k = query.shape[2], key.shape[2]
    is_causal = bool(n_q > 1 and attention_mask is None and is_causal)
    mask = attention_mask
    if mask is not None and mask.dim() == 4:
        mask = mask[:, :, :, :n_k]
    plain = (kwargs.get("softcap") is None and kwargs.get("position_bias") is None
             and kwargs.get("cache") is None and not kwargs.get("output_attentions", False)
             and (not is_causal or n_q == n_k))
    if plain and _has_kernel("flash_attn", query.device.type):
        # SDPA's call, decided and rewritten for mytorch::flash_attn by the C++ code of patch()'s
        # route (counted there), or run by PyTorch's SDPA
        return _hf_attention(query, key, value, mask, dropout, is_causal, scaling).transpose(1, 2), None
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
    AttentionMaskInterface.register(NAME, _causal_skipping_mask(sdpa_mask))
    _registered.append(True)


def _causal_skipping_mask(sdpa_mask):
    """sdpa_mask, but returning None (the attention then runs with is_causal) whenever the mask
    would only say "causal": no padding mask, the plain causal pattern, no window, and one
    query or as many queries as keys. transformers' own skip gives up under torch.compile on
    torch < 2.14 (it cannot tell compiling from exporting there) and materializes a
    (batch, 1, q, k) mask, which the attention kernel then reads in every layer and head.
    These conditions read only Python values and None-ness, never tensor data, so they hold
    under torch.compile too."""
    from transformers.masking_utils import causal_mask_function

    params = inspect.signature(sdpa_mask).parameters

    def mask(*args, **kwargs):
        a = dict(zip(params, args), **kwargs)
        q_len, kv_len, q_off = a.get("q_length"), a.get("kv_length"), a.get("q_offset", 0)
        if (a.get("allow_is_causal_skip", True) and a.get("attention_mask") is None
                and a.get("local_size") is None
                and a.get("mask_function", causal_mask_function) is causal_mask_function
                and isinstance(q_off, int) and isinstance(q_len, int) and isinstance(kv_len, int)
                and (q_len == 1 or q_len == kv_len)):
            return None
        return sdpa_mask(*args, **kwargs)

    return mask


# The module that defines AttentionInterface: registering attn_implementation="mytorch" as it
# loads puts the name in place before any model can be built.
_HF_MODELING = "transformers.modeling_utils"


def _register_quietly() -> None:
    """register_hf(), or one warning saying why attn_implementation="mytorch" is unavailable."""
    try:
        register_hf()
    except ImportError as e:
        import warnings

        warnings.warn(f'mytorch_ext: attn_implementation="mytorch" is unavailable with this '
                      f"transformers ({e}); mytorch_ext.register_hf() needs transformers >= 4.48",
                      RuntimeWarning, stacklevel=2)


def install_import_hook() -> None:
    """Make attn_implementation="mytorch" available whatever the import order: register now
    when transformers' modeling code is loaded, else as soon as it is (mytorch_ext imported
    before transformers needs no register_hf() call either)."""
    after_import(_HF_MODELING, _register_quietly)


def uninstall_import_hook() -> None:
    cancel(_HF_MODELING, _register_quietly)


# -------------------------------------------------------------------------- module swaps

def _rms_forward(self, hidden_states):
    w = self.weight
    x = hidden_states
    dev = x.device.type
    if dev in ("cpu", "cuda") and _has_kernel("rms_norm", dev) and w.dtype == x.dtype:
        _count("rms_norm", True)
        return _call("rms_norm", x, [x.shape[-1]], w, float(self.variance_epsilon))[0]
    _count("rms_norm", False)
    return type(self).forward(self, hidden_states)


def _layer_norm_forward(self, x):
    dev = x.device.type
    w, b, dt = self.weight, self.bias, x.dtype  # read once: module attribute lookups cost
    if (dev in ("cpu", "cuda") and _has_kernel("layer_norm", dev)
            and (w is None or w.dtype == dt) and (b is None or b.dtype == dt)):
        _count("layer_norm", True)
        return _call("layer_norm", x, list(self.normalized_shape), w, b, self.eps)[0]
    _count("layer_norm", False)
    return type(self).forward(self, x)


def _gelu_tanh_forward(self, x):
    dev = x.device.type
    if dev in ("cpu", "cuda") and _has_kernel("gelu", dev):
        _count("gelu", True)
        return _call("gelu", x, "tanh")
    _count("gelu", False)
    return type(self).forward(self, x)


def _swiglu_forward(self, x):
    gate, up = self.gate_proj(x), self.up_proj(x)
    if gate.shape == up.shape and gate.dtype == up.dtype and _fused_ok(_SWIGLU, gate, up):
        _count("swiglu", True)
        return self.down_proj(_call("swiglu", gate, up))
    _count("swiglu", False)
    return self.down_proj(self.act_fn(gate) * up)  # LlamaMLP.forward


_SWIGLU = ("swiglu", "swiglu_backward")
_ROPE = ("rope", "rope_backward")


# ------------------------------------------------------------- Llama-style code, by bytecode

def _consts(code):
    return tuple(c for c in code.co_consts if not isinstance(c, str))  # docstrings differ


def _same_code(f, g):
    f, g = getattr(f, "__code__", None), getattr(g, "__code__", None)
    return (f is not None and g is not None and f.co_code == g.co_code
            and f.co_names == g.co_names and _consts(f) == _consts(g))


def _llama():
    """modeling_llama's LlamaMLP.forward, apply_rotary_pos_emb (the original, also while
    swapped) and rotate_half; None without them."""
    try:
        from transformers.models.llama import modeling_llama as m
        refs = (m.LlamaMLP.forward, original_rope(m), m.rotate_half)
    except (ImportError, AttributeError):
        return None
    return refs


def _is_silu(act, module):
    cfg = getattr(module, "config", None)
    if getattr(cfg, "hidden_act", "silu") not in ("silu", "swish"):
        return False
    return isinstance(act, torch.nn.SiLU) or type(act).__name__ == "SiLUActivation"


def _is_swiglu_mlp(module, llama):
    parts = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    return (llama is not None and all(isinstance(p, torch.nn.Module) for p in parts)
            and _is_silu(getattr(module, "act_fn", None), module)
            and _same_code(type(module).forward, llama[0]))


def _swap_for(module, llama=None):
    """The forward that replaces `module`'s, or None (also where the device of the module's
    parameters has no kernel for it: a swap would only add a call that falls through)."""
    cls = type(module).__name__
    w = getattr(module, "weight", None)
    dev = w.device.type if isinstance(w, torch.Tensor) else None
    if cls.endswith("MLP") and _is_swiglu_mlp(module, llama):
        gw = getattr(module.gate_proj, "weight", None)
        dev = gw.device.type if isinstance(gw, torch.Tensor) else None
        return _swiglu_forward if dev is None or _has_kernel("swiglu", dev) else None
    if isinstance(module, torch.nn.LayerNorm):
        return _layer_norm_forward if dev is None or _has_kernel("layer_norm", dev) else None
    if cls.endswith("RMSNorm") and hasattr(module, "variance_epsilon") and w is not None:
        return _rms_forward if _has_kernel("rms_norm", dev) else None
    if cls in ("NewGELUActivation", "GELUTanh", "PytorchGELUTanh", "GELUPytorchTanh"):
        return _gelu_tanh_forward
    return None


# ---------------------------------------------------------------------------------- RoPE

# modeling module name -> [original apply_rotary_pos_emb, its replacement, handles using it]
_rope_state: dict = {}
# names of the modeling modules whose apply_rotary_pos_emb has been swapped at some point
_rope_touched: set = set()


def _is_ours(fn):
    return getattr(fn, "_mytorch_rope", False) is True


def original_rope(module):
    """A modeling module's (or module name's) own apply_rotary_pos_emb, whether or not
    apply_to has swapped it: the one recorded by the swap, else the module's with any
    replacement of ours unwrapped; None where it has none."""
    name = module if isinstance(module, str) else module.__name__
    if name in _rope_state:
        return _rope_state[name][0]
    mod = sys.modules.get(name) if isinstance(module, str) else module
    fn = getattr(mod, "apply_rotary_pos_emb", None)
    while _is_ours(fn):
        fn = fn.__wrapped__
    return fn


def _rope_ok(q, k, cos, sin):
    """q, k (batch, heads, seq, head_dim); cos, sin (1, seq, head_dim), halves equal."""
    if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or cos.shape != sin.shape:
        return False
    d = q.shape[-1]
    return (cos.shape[0] == 1 and d % 2 == 0 and k.shape[-1] == d and cos.shape[-1] == d
            and q.shape[2] == k.shape[2] == cos.shape[1] and q.dtype == k.dtype
            and _fused_ok(_ROPE, q, k, cos, sin))


def _make_rope(original):
    """apply_rotary_pos_emb through mytorch::rope, the original where it does not apply."""
    names = list(inspect.signature(original).parameters)[4:]  # after q, k, cos, sin

    def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
        extra = dict(zip(names, args))
        extra.update(kwargs)
        if extra.get("unsqueeze_dim", 1) == 1 and _rope_ok(q, k, cos, sin):
            _count("rope", True)
            half = q.shape[-1] // 2
            c, s = cos[0, :, :half], sin[0, :, :half]
            # (batch, seq, heads, head_dim) views: q_proj(x).view(...).transpose(1, 2) undone
            q_out = _call("rope", q.transpose(1, 2), c, s, False).transpose(1, 2)
            k_out = _call("rope", k.transpose(1, 2), c, s, False).transpose(1, 2)
            return q_out, k_out
        _count("rope", False)
        return original(q, k, cos, sin, *args, **kwargs)

    apply_rotary_pos_emb.__wrapped__ = original
    apply_rotary_pos_emb._mytorch_rope = True
    return apply_rotary_pos_emb


def _rope_modules(model, llama):
    """Modeling modules of model's attention classes whose RoPE is Llama's code."""
    found = []
    if llama is None:
        return found
    for m in model.modules():
        mod = sys.modules.get(type(m).__module__)
        if not type(m).__name__.endswith("Attention") or mod is None or mod in found:
            continue
        original = original_rope(mod)
        rotate_half = getattr(mod, "rotate_half", None)
        if _same_code(original, llama[1]) and _same_code(rotate_half, llama[2]):
            found.append(mod)
    return found


def _acquire_rope(mod):
    entry = _rope_state.get(mod.__name__)
    if entry is None:
        original = original_rope(mod)
        _rope_touched.add(mod.__name__)
        entry = _rope_state[mod.__name__] = [original, _make_rope(original), 0]
        mod.apply_rotary_pos_emb = entry[1]
    entry[2] += 1


def _release_rope(mod):
    entry = _rope_state.get(mod.__name__)
    if entry is None:
        return
    entry[2] -= 1
    if entry[2] <= 0:
        if mod.apply_rotary_pos_emb is entry[1]:  # unless replaced since by someone else
            mod.apply_rotary_pos_emb = entry[0]
        del _rope_state[mod.__name__]


# ------------------------------------------------------------------------ causal-LM loss

_CAUSAL_LM = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM", "GPT2LMHeadModel")
# arguments of the causal-LM forward that are not the base model's
_HEAD_ARGS = ("labels", "logits_to_keep", "num_logits_to_keep", "return_dict")
CROSS_ENTROPY_MODES = ("fused_linear", "fused")


def _output_class(fn):
    """The ModelOutput class (with loss and logits) that a forward is annotated to return."""
    from transformers.utils import ModelOutput

    ann = inspect.signature(fn).return_annotation
    module = sys.modules.get(getattr(inspect.unwrap(fn), "__module__", ""), None)
    if isinstance(ann, str):  # postponed annotations: look the names up in the module
        cands = [getattr(module, n, None) for n in re.findall(r"[A-Za-z_]\w*", ann)]
    else:
        cands = [ann, *getattr(ann, "__args__", ())]
    for c in cands:
        if isinstance(c, type) and issubclass(c, ModelOutput):
            fields = [f.name for f in dataclasses.fields(c)]
            if "loss" in fields and "logits" in fields:
                return c, tuple(f for f in fields if f not in ("loss", "logits"))
    return None


def _causal_lm_plan(model):
    """What the fused loss needs of `model`, or None where its forward is not a known one."""
    cls = next((c for c in type(model).__mro__ if c.__name__ in _CAUSAL_LM), None)
    if cls is None or type(model).forward is not cls.forward:
        return None
    try:
        from transformers.loss.loss_utils import ForCausalLMLoss
    except ImportError:
        return None
    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, prefix, None) if prefix else None
    head = getattr(model, "lm_head", None)
    cfg = getattr(model, "config", None)
    if (not isinstance(base, torch.nn.Module) or not isinstance(head, torch.nn.Linear)
            or getattr(model, "loss_function", None) is not ForCausalLMLoss or cfg is None):
        return None
    out = _output_class(cls.forward)
    if out is None:
        return None
    params = inspect.signature(cls.forward).parameters
    names = [n for n, p in params.items() if p.kind == p.POSITIONAL_OR_KEYWORD][1:]  # no self
    base_params = inspect.signature(type(base).forward).parameters
    base_names = None if any(p.kind == p.VAR_KEYWORD for p in base_params.values()) \
        else frozenset(base_params)
    return dict(names=names, prefix=prefix, base_names=base_names, out_cls=out[0],
                out_fields=out[1], loss_fn=ForCausalLMLoss)


def _make_causal_lm_forward(plan, mode):
    names, prefix, base_names = plan["names"], plan["prefix"], plan["base_names"]
    out_cls, out_fields, loss_fn = plan["out_cls"], plan["out_fields"], plan["loss_fn"]
    positional = set(names)

    def forward(self, *args, **kwargs):
        bound = dict(zip(names, args))
        bound.update(kwargs)
        labels = bound.get("labels")
        if labels is None or not _head_applies(self, bound, len(args) <= len(names), mode):
            if labels is not None:
                _count("cross_entropy", False)
            return type(self).forward(self, *args, **kwargs)
        base_kwargs = {k: v for k, v in bound.items() if k not in _HEAD_ARGS
                       and (base_names is None or k in base_names)}
        base_out = getattr(self, prefix)(**base_kwargs)
        hidden = getattr(base_out, "last_hidden_state", None)
        if hidden is None:
            hidden = base_out[0]
        # what the original passes to loss_function: its **kwargs (num_items_in_batch, ...)
        extra = {k: v for k, v in bound.items() if k not in positional and k not in _HEAD_ARGS}
        loss, logits = _causal_lm_loss(self, hidden, labels, mode, extra, loss_fn)
        rest = {f: getattr(base_out, f, None) for f in out_fields}
        return out_cls(loss=loss, logits=logits, **rest)

    return forward


def _head_applies(self, bound, args_fit, mode):
    head, cfg = self.lm_head, self.config
    w = head.weight
    keep = bound.get("logits_to_keep", bound.get("num_logits_to_keep", 0))
    op = "fused_linear_cross_entropy" if mode == "fused_linear" else "fused_cross_entropy"
    return (args_fit and isinstance(keep, int) and keep == 0
            and bound.get("return_dict") is not False and getattr(cfg, "return_dict", True)
            and head.bias is None and getattr(cfg, "final_logit_softcapping", None) is None
            and w.shape[0] == cfg.vocab_size and self.__dict__.get("_loss_function") is None
            and not torch.is_autocast_enabled(w.device.type)
            and _fused_ok((op,), w))


def _causal_lm_loss(self, hidden, labels, mode, extra, loss_fn):
    """transformers' ForCausalLMLoss through the fused kernels: (loss, logits or None)."""
    ignore_index = extra.get("ignore_index", -100)
    n_items = extra.get("num_items_in_batch")
    shift_labels = extra.get("shift_labels")
    if shift_labels is None:  # tokens < n predict n
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    target = shift_labels.reshape(-1).to(hidden.device)
    # a sum over the batch's items divided by their count: the division rides in the kernels'
    # pass (a loss gradient of 1 again), not in a pass of its own over the gradients
    reduction = "mean" if n_items is None else "sum"
    w = self.lm_head.weight
    if mode == "fused_linear" and hidden.dtype == w.dtype and target.dtype == torch.int64:
        _count("cross_entropy", True)
        loss = _loss.fused_linear_cross_entropy(hidden.reshape(-1, hidden.shape[-1]), w, target,
                                                ignore_index, 0.0, reduction, 0, divisor=n_items)
        logits = None
    else:  # "fused", or hidden states of another dtype than lm_head's weight
        logits = self.lm_head(hidden)
        flat = logits.reshape(-1, logits.shape[-1])
        if not (target.dtype == torch.int64 and _fused_ok(
                ("fused_cross_entropy", "fused_cross_entropy_backward", "fused_cross_entropy_grad"), flat)):
            _count("cross_entropy", False)
            return loss_fn(logits=logits, labels=labels, vocab_size=self.config.vocab_size,
                           **extra), logits
        _count("cross_entropy", True)
        loss = _loss.fused_cross_entropy(flat, target, ignore_index, 0.0, reduction, divisor=n_items)
    return loss.float(), logits  # (ForCausalLMLoss upcasts the logits: an fp32 loss)


# -------------------------------------------------------------------------------- handle

class Handle:
    """What apply_to changed; `.revert()` restores it."""

    def __init__(self, model):
        self.model = model
        self.modules = []       # modules whose forward is overridden on the instance
        self.attn = None        # previous attn_implementation, when it was changed
        self.rope_modules = []  # modeling modules whose apply_rotary_pos_emb is swapped

    def revert(self):
        _live.discard(self)
        for m in self.modules:
            m.__dict__.pop("forward", None)
        self.modules = []
        for mod in self.rope_modules:
            _release_rope(mod)
        self.rope_modules = []
        if self.attn is not None:
            self.model.set_attn_implementation(self.attn)
            self.attn = None
        if getattr(self.model, "_mytorch_handle", None) is self:
            del self.model._mytorch_handle

    def __repr__(self):
        return (f"mytorch_ext.apply_to handle: {len(self.modules)} modules, "
                f"{len(self.rope_modules)} RoPE functions, "
                f"attention {'swapped' if self.attn else 'unchanged'}")


_live = weakref.WeakSet()  # handles not reverted yet (those of models still alive)


def revert_all() -> None:
    """Revert every apply_to handle not reverted yet, then put back every swapped
    apply_rotary_pos_emb, also those held by handles that were dropped unreverted (their
    models garbage-collected). Does nothing where nothing is applied. Errors of reverts are
    raised once every handle and module global has been restored."""
    errors = []
    for h in list(_live):
        try:
            h.revert()
        except Exception as e:  # noqa: BLE001  the rest is restored first
            errors.append(e)
    for name in sorted(_rope_touched):  # any replacement of ours still installed
        mod = sys.modules.get(name)
        if mod is not None and _is_ours(getattr(mod, "apply_rotary_pos_emb", None)):
            mod.apply_rotary_pos_emb = original_rope(mod)
    _rope_state.clear()
    if errors:
        raise errors[0]


def apply_to(model: torch.nn.Module, *, norms=True, activations=True, attention=True,
             rope=True, cross_entropy="fused_linear") -> Handle:
    """Swap parts of a Llama / Qwen2 / Mistral / GPT-2 style model for mytorch kernels.

    - norms: RMSNorm / LayerNorm modules;
    - activations: GPT-2's tanh GELU, and SwiGLU MLPs (down(silu(gate(x)) * up(x)));
    - attention: attn_implementation "mytorch";
    - rope: the modeling module's `apply_rotary_pos_emb` (a module global: while any handle
      holds it, every model of that family uses it);
    - cross_entropy: the loss of LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM /
      GPT2LMHeadModel calls given `labels`, computed as transformers' ForCausalLMLoss:
      "fused_linear" (default) runs fused_linear_cross_entropy on the hidden states and
      lm_head's weight, so the logits are never materialized and the output's `logits` is
      None; "fused" computes the logits and runs fused_cross_entropy on them, without an fp32
      copy; None or False keeps the original loss. Calls without labels, with
      logits_to_keep, return_dict=False or under autocast run the original forward. The
      fused kernels return the loss in the model's dtype; it is then cast to float32.

    Applying twice is harmless (the first swap is reverted first).
    """
    if cross_entropy not in (None, False, *CROSS_ENTROPY_MODES):
        raise ValueError(f"mytorch_ext.apply_to: cross_entropy must be one of "
                         f"{CROSS_ENTROPY_MODES}, None or False; got {cross_entropy!r}")
    if getattr(model, "_mytorch_handle", None) is not None:
        model._mytorch_handle.revert()
    refresh_kernels()
    llama = _llama()
    h = Handle(model)
    _live.add(h)
    try:
        _apply(model, h, llama, norms, activations, attention, rope, cross_entropy)
    except BaseException:
        h.revert()  # nothing half-applied
        raise
    model._mytorch_handle = h
    return h


def _apply(model, h, llama, norms, activations, attention, rope, cross_entropy):
    for m in model.modules():
        fwd = _swap_for(m, llama)
        if fwd is None or "forward" in m.__dict__:
            continue
        is_norm = fwd in (_rms_forward, _layer_norm_forward)
        is_act = fwd in (_gelu_tanh_forward, _swiglu_forward)
        if (is_norm and not norms) or (is_act and not activations):
            continue
        m.forward = types.MethodType(fwd, m)
        h.modules.append(m)
    if rope:
        for mod in _rope_modules(model, llama):
            _acquire_rope(mod)
            h.rope_modules.append(mod)
    plan = _causal_lm_plan(model) if cross_entropy else None
    if plan is not None and "forward" not in model.__dict__:
        model.forward = types.MethodType(_make_causal_lm_forward(plan, cross_entropy), model)
        h.modules.append(model)
    cfg = getattr(model, "config", None)
    if attention and cfg is not None and hasattr(model, "set_attn_implementation"):
        prev = cfg._attn_implementation
        if prev != NAME:
            register_hf()
            model.set_attn_implementation(NAME)
            h.attn = prev


def revert(model: torch.nn.Module) -> None:
    """Undo apply_to(model)."""
    h = getattr(model, "_mytorch_handle", None)
    if h is not None:
        h.revert()


__all__ = ["register_hf", "apply_to", "revert", "revert_all", "original_rope",
           "mytorch_attention_forward", "Handle"]
