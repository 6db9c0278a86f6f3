"""attn_implementation="mytorch" builds no causal mask where the attention can run with
is_causal instead: eagerly and under torch.compile (where transformers' own sdpa skip can give
up and materialize a (batch, 1, q, k) mask), and still builds every mask that says more than
"causal" (padding, windows, a prefill against a cache) as transformers does."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
import mytorch_ext  # noqa: E402
from transformers.masking_utils import (  # noqa: E402
    ALL_MASK_ATTENTION_FUNCTIONS, causal_mask_function, sliding_window_causal_mask_function)

mytorch_ext.register_hf()
MASK = ALL_MASK_ATTENTION_FUNCTIONS["mytorch"]


def _call(**kw):
    args = dict(batch_size=2, q_length=8, kv_length=8, q_offset=0, kv_offset=0,
                mask_function=causal_mask_function, attention_mask=None, allow_is_causal_skip=True,
                dtype=torch.float32, config=None, use_vmap=False, device="cpu")
    args.update(kw)
    return MASK(**args)


def test_plain_causal_builds_no_mask():
    assert _call() is None
    assert _call(q_length=1, kv_length=20) is None  # one query sees every key


def test_compiled_plain_causal_builds_no_mask():
    def f(x):
        return x + (1.0 if _call() is None else 0.0)

    out = torch.compile(f, backend="eager", fullgraph=True)(torch.zeros(1))
    assert out.item() == 1.0


@pytest.mark.parametrize("case", ["padding", "window", "prefill_with_cache", "no_skip"])
def test_masks_that_say_more_are_built(case):
    pad = torch.ones(2, 8, dtype=torch.bool)
    pad[0, :3] = False
    kw = {"padding": dict(attention_mask=pad),
          "window": dict(mask_function=sliding_window_causal_mask_function(4), local_size=4),
          "prefill_with_cache": dict(q_length=4, kv_length=8, q_offset=4),
          "no_skip": dict(allow_is_causal_skip=False)}[case]
    m = _call(**kw)
    assert isinstance(m, torch.Tensor) and m.dtype == torch.bool and m.shape[-2:] == (kw.get("q_length", 8), 8)
    from transformers.masking_utils import sdpa_mask

    args = dict(batch_size=2, q_length=8, kv_length=8, q_offset=0, kv_offset=0,
                mask_function=causal_mask_function, attention_mask=None, device="cpu")
    args.update(kw)
    assert torch.equal(m, sdpa_mask(**args))  # transformers' own mask, unchanged
    if case == "padding":
        assert not m[0, 0, :, :3].any() and torch.equal(m[1, 0], torch.ones(8, 8, dtype=torch.bool).tril())
