"""Drop-in use of mytorch kernels in existing models.

- aten.py: `patch()` / `unpatch()` / `patched()` route ATen ops (SDPA, layer_norm, rms_norm,
  softmax, log_softmax, gelu, cross_entropy) to mytorch kernels through torch.library, for
  any model; `patch_stats()` counts the calls that ran mytorch kernels and those that fell
  through.
- hf.py: Hugging Face transformers: attn_implementation="mytorch" and `apply_to(model)` /
  `revert(model)`, which swap norms, activations, SwiGLU, RoPE, attention and the causal-LM
  loss of Llama / Qwen2 / Mistral / GPT-2 style models.
"""
from .aten import (attention_backend, available_ops, patch, patch_stats, patched, patched_ops, reset_stats,
                   set_attention_backend, unpatch)
from .hf import apply_to, register_hf, revert

__all__ = ["patch", "unpatch", "patched", "patch_stats", "reset_stats", "available_ops",
           "patched_ops", "apply_to", "revert", "register_hf", "set_attention_backend", "attention_backend"]
