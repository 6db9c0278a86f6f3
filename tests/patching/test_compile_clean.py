"""torch.compile of patched Hugging Face models (patch() + apply_to): one full graph, and no
recompile across training steps; patch_stats() counts eager calls and puts nothing in the
graph (a counter read inside a compiled region would be a guard on its value, and every step
would recompile)."""
from __future__ import annotations

import pytest
import torch

import mytorch_ext
from helpers import causal_lm_losses
from hf_models import VOCAB

STEPS = 3


def _config(name, dropout):
    import transformers as tf

    if name == "gpt2":
        return tf.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                             resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                             attn_implementation="sdpa")
    return tf.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64, attention_dropout=dropout,
                          attn_implementation="sdpa")


def _model(name, dropout):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(_config(name, dropout)).train()


def _batches(n=STEPS, b=2, seq=16):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, VOCAB, (b, seq), generator=g) for _ in range(n)]


def _train(model, step_model):
    """Losses of STEPS training steps of model (AdamW) run through step_model."""
    return causal_lm_losses(step_model, torch.optim.AdamW(model.parameters(), lr=1e-3), _batches())


def _compiled_training(name, dropout, backend):
    """Losses of STEPS compiled training steps of the patched model, and Dynamo's counters."""
    from torch._dynamo.utils import counters

    model = _model(name, dropout)
    torch._dynamo.reset()
    counters.clear()
    with mytorch_ext.patched():
        handle = mytorch_ext.apply_to(model)
        compiled = torch.compile(model, backend=backend, fullgraph=True)
        try:
            with torch._dynamo.config.patch(error_on_recompile=True):
                losses = _train(model, compiled)
        finally:
            handle.revert()
            torch._dynamo.reset()
    return losses, {k: dict(v) for k, v in counters.items()}


def _check_one_graph(stats):
    assert stats["stats"]["unique_graphs"] == 1, stats["stats"]
    assert not stats.get("graph_break"), stats["graph_break"]
    assert not stats.get("recompiles"), stats["recompiles"]


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_compiled_training_one_graph_no_recompile(name):
    """3 training steps of the compiled patched model: one graph, compiled once (inductor),
    with the losses of the same patched model in eager."""
    losses, stats = _compiled_training(name, 0.0, "inductor")
    _check_one_graph(stats)
    model = _model(name, 0.0)
    with mytorch_ext.patched():
        handle = mytorch_ext.apply_to(model)
        mytorch_ext.patch_stats(reset=True)
        eager = _train(model, model)
        stats = mytorch_ext.patch_stats()
        handle.revert()
    attention = "hf_attention"
    assert stats[attention]["mytorch"] == 2 * STEPS and stats[attention]["fallthrough"] == 0, stats
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_compiled_training_with_dropout(name):
    """The same with dropout 0.1 (attention, and GPT-2's residual and embedding dropout)."""
    losses, stats = _compiled_training(name, 0.1, "aot_eager")
    _check_one_graph(stats)
    assert all(torch.isfinite(torch.tensor(losses))), losses


def test_patch_stats_count_eager_calls_only():
    """Eager calls are counted, per call; tracing counts nothing, and the apply_to swaps
    traced into a compiled graph are not counted when it runs."""
    model = _model("llama", 0.0)
    ids = _batches(1)[0]
    # a module that reaches patch()'s kernels (softmax, gelu) rather than apply_to's
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Softmax(-1))
    x = torch.randn(4, 8)
    with mytorch_ext.patched():
        handle = mytorch_ext.apply_to(model)
        for _ in range(2):
            model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
            mlp(x).sum().backward()
        eager = mytorch_ext.patch_stats(reset=True)
        torch._dynamo.reset()
        compiled, compiled_mlp = (torch.compile(m, backend="aot_eager", fullgraph=True)
                                  for m in (model, mlp))
        for _ in range(2):
            compiled(input_ids=ids, labels=ids, use_cache=False).loss.backward()
            compiled_mlp(x).sum().backward()
        under_compile = mytorch_ext.patch_stats()
        handle.revert()
        torch._dynamo.reset()
    two = {"mytorch": 2, "fallthrough": 0}
    four = {"mytorch": 4, "fallthrough": 0}
    ten = {"mytorch": 10, "fallthrough": 0}  # 2 per layer + the final norm, 2 calls
    assert eager == {"cross_entropy": two, "gelu": two, "hf_attention": four, "rms_norm": ten,
                     "rope": four, "softmax": two, "swiglu": four}, eager
    # tracing counts nothing; a compiled graph that calls the patch() kernels (gelu, softmax)
    # as ATen ops counts each of its runs, at most one per call
    traced = {k: v for k, v in under_compile.items() if k not in ("gelu", "softmax")}
    assert traced == {}, under_compile
    assert all(v["mytorch"] <= 2 and v["fallthrough"] == 0 for v in under_compile.values()), under_compile
