"""Tiny Hugging Face models built from configs (no downloads), and a loss/gradient probe."""
from __future__ import annotations

import torch

VOCAB = 96


def config(name, attn="sdpa"):
    import transformers as tf

    common = dict(vocab_size=VOCAB, attn_implementation=attn)
    if name == "gpt2":
        return tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0,
                             embd_pdrop=0.0, attn_pdrop=0.0, **common)
    llama_like = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      **common)
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "mistral": tf.MistralConfig}[name]
    return cls(**llama_like)


def build(name, attn="sdpa", dtype=torch.float32, device="cpu", seed=0):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config(name, attn)).to(device=device, dtype=dtype)
    return model


def batch(kind, device="cpu", b=2, n=24, seed=1):
    """input_ids, attention_mask (None for causal only), labels (-100 at padding)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (b, n), generator=g)
    if kind == "causal":
        return ids.to(device), None, ids.clone().to(device)
    mask = torch.ones(b, n, dtype=torch.long)
    mask[0, n - 5:] = 0          # right padding
    if b > 1:
        mask[1, :3] = 0          # left padding
    labels = ids.masked_fill(mask == 0, -100)
    return ids.to(device), mask.to(device), labels.to(device)


def probe(model, ids, mask, labels):
    """logits (at attended positions; None where the model returns none), loss, and every
    parameter's gradient."""
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    logits = None if out.logits is None else out.logits.detach()
    if mask is not None and logits is not None:
        logits = logits[mask.bool()]
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits, out.loss.detach(), grads


def assert_same(a, b, rtol, atol):
    (la, lossa, ga), (lb, lossb, gb) = a, b
    if la is not None or lb is not None:
        torch.testing.assert_close(la, lb, rtol=rtol, atol=atol)
    torch.testing.assert_close(lossa, lossb, rtol=rtol, atol=atol)
    assert ga.keys() == gb.keys() and len(ga) > 0
    for n in ga:
        torch.testing.assert_close(ga[n], gb[n], rtol=rtol, atol=atol, msg=lambda m: f"{n}: {m}")
