"""A patched training step on CUDA (patch() routes, apply_to swaps, forward, backward, fused
AdamW) synchronises nothing with the host, captures whole into a CUDA graph whose replays
give the eager losses, and trains under torch.compile(mode="reduce-overhead").

Two models: a small transformer written with torch.nn.functional (every hot op through a
patch() route, nothing else in the step), and Hugging Face Llama / GPT-2 built from configs.
transformers itself synchronises in a training forward (its packed-sequence check of the
position ids), so for those the check is that patching adds no synchronisation."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import mytorch_ext
from helpers import causal_lm_losses

pytestmark = pytest.mark.gpu

VOCAB, B, SEQ = 512, 2, 64


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = torch.nn.RMSNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(F.rms_norm(x, (d,), self.n1.weight)).view(b, s, 3, self.heads, -1).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.n2(x)), approximate="tanh"))


class TinyLM(torch.nn.Module):
    """Embedding, two blocks of F.rms_norm / SDPA / LayerNorm / GELU, F.cross_entropy."""

    def __init__(self, d=128, heads=4):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(2))
        self.head = torch.nn.Linear(d, VOCAB)

    def forward(self, input_ids, labels, **_):
        x = self.emb(input_ids)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(x)[:, :-1].reshape(-1, VOCAB)
        return F.cross_entropy(logits, labels[:, 1:].reshape(-1))


def _tiny():
    torch.manual_seed(0)
    return TinyLM().to("cuda", torch.bfloat16)


def _hf(name):
    import transformers as tf

    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4, n_positions=SEQ,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    else:
        cfg = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                             attn_implementation="sdpa")
    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(cfg).to("cuda", torch.bfloat16).train()


def _loss(model, ids):
    out = model(input_ids=ids, labels=ids, use_cache=False)
    return out if torch.is_tensor(out) else out.loss


def _batches(n):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, VOCAB, (B, SEQ), generator=g).cuda() for _ in range(n)]


def _opt(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True, capturable=True)


def _step(model, opt, ids):
    loss = _loss(model, ids)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)  # a captured graph keeps its .grad buffers
    return loss


@pytest.fixture
def patched():
    """patch() for the test; apply_to handles appended to the list are reverted after it."""
    mytorch_ext.patch()
    handles = []
    yield handles
    for h in handles:
        h.revert()
    mytorch_ext.unpatch()
    mytorch_ext.set_attention_backend("auto")


def _syncs(fn) -> int:
    """How many synchronising CUDA calls fn makes (torch.cuda's sync debug mode)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(w.message) for w in caught)


def test_tiny_step_does_not_synchronise(patched):
    mytorch_ext.set_attention_backend("mytorch")  # every attention call on mytorch's kernel
    mytorch_ext.patch()
    model = _tiny()
    opt = _opt(model)
    data = _batches(3)
    _step(model, opt, data[0])  # first calls: plans, lazy optimizer state
    mytorch_ext.patch_stats(reset=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for ids in data[1:]:
            _step(model, opt, ids)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    stats = mytorch_ext.patch_stats()
    for op in ("sdpa", "rms_norm", "layer_norm", "gelu", "cross_entropy"):
        assert stats.get(op, {}).get("mytorch", 0) > 0, stats


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_patching_adds_no_synchronisation(name, patched):
    data = _batches(2)
    stock = _hf(name)
    mytorch_ext.unpatch()
    opt = _opt(stock)
    _step(stock, opt, data[0])
    n_stock = _syncs(lambda: _step(stock, opt, data[1]))
    mytorch_ext.patch()
    model = _hf(name)
    patched.append(mytorch_ext.apply_to(model))
    opt = _opt(model)
    _step(model, opt, data[0])
    n_patched = _syncs(lambda: _step(model, opt, data[1]))
    assert n_patched <= n_stock, (n_patched, n_stock)


def _graph_losses(model, data, warmup=3):
    """Losses of `warmup` eager steps on a side stream, then of one captured step replayed
    on each remaining batch."""
    opt = _opt(model)
    static_ids = data[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    got = []
    with torch.cuda.stream(side):
        for ids in data[:warmup]:
            static_ids.copy_(ids)
            got.append(_step(model, opt, static_ids).item())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = _step(model, opt, static_ids)
    for ids in data[warmup:]:
        static_ids.copy_(ids)
        graph.replay()
        got.append(static_loss.item())
    return got


@pytest.mark.parametrize("name", ["tiny", "llama"])
def test_whole_step_cuda_graph_replays_eager_losses(name, patched):
    make = _tiny if name == "tiny" else lambda: _hf(name)
    data = _batches(1) * 8  # one batch, learnt step by step: the loss must fall
    eager = make()
    if name != "tiny":
        patched.append(mytorch_ext.apply_to(eager))
    opt = _opt(eager)
    want = [_step(eager, opt, ids).item() for ids in data]
    model = make()
    if name != "tiny":
        patched.append(mytorch_ext.apply_to(model))
    got = _graph_losses(model, data)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=2e-2, atol=2e-2)
    assert got[-1] < got[2] - 0.1, got  # the replays train (the optimizer step is in the graph)


def test_reduce_overhead_compile_trains_like_eager(patched):
    data = _batches(6)
    eager = _hf("llama")
    patched.append(mytorch_ext.apply_to(eager))
    opt = _opt(eager)
    want = [_step(eager, opt, ids).item() for ids in data]

    model = _hf("llama")
    patched.append(mytorch_ext.apply_to(model))
    compiled = torch.compile(model, mode="reduce-overhead")
    got = causal_lm_losses(compiled, _opt(model), data)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=2e-2, atol=2e-2)
