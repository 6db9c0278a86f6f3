"""A patched Hugging Face training step (patch() + apply_to, forward, backward, fused AdamW)
on CUDA: it synchronises nothing with the host, it captures whole into a CUDA graph whose
replays give the eager losses, and it trains under torch.compile(mode="reduce-overhead")."""
from __future__ import annotations

import pytest
import torch

import mytorch_ext

pytestmark = pytest.mark.gpu

VOCAB, B, SEQ = 512, 2, 64


def _model(name):
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


def _batches(n):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, VOCAB, (B, SEQ), generator=g).cuda() for _ in range(n)]


def _opt(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True, capturable=True)


def _step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)  # the graph keeps its .grad buffers
    return loss


@pytest.fixture
def patched():
    mytorch_ext.patch()
    handles = []
    yield handles
    for h in handles:
        h.revert()
    mytorch_ext.unpatch()


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_step_does_not_synchronise(name, patched):
    model = _model(name)
    patched.append(mytorch_ext.apply_to(model))
    opt = _opt(model)
    data = _batches(3)
    _step(model, opt, data[0])  # first calls: plans, autotuning, lazy state
    torch.cuda.synchronize()
    mytorch_ext.patch_stats(reset=True)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for ids in data[1:]:
            _step(model, opt, ids)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    stats = mytorch_ext.patch_stats()
    assert any(c["mytorch"] for c in stats.values()), stats


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_whole_step_cuda_graph_replays_eager_losses(name, patched):
    data = _batches(8)
    eager = _model(name)
    patched.append(mytorch_ext.apply_to(eager))
    opt = _opt(eager)
    want = [_step(eager, opt, ids).item() for ids in data]

    model = _model(name)
    patched.append(mytorch_ext.apply_to(model))
    opt = _opt(model)
    static_ids = data[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    got = []
    with torch.cuda.stream(side):  # warm-up steps, eager, on a side stream
        for ids in data[:3]:
            static_ids.copy_(ids)
            got.append(_step(model, opt, static_ids).item())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = _step(model, opt, static_ids)
    for ids in data[3:]:
        static_ids.copy_(ids)
        graph.replay()
        got.append(static_loss.item())
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=2e-2, atol=2e-2)
    assert got[-1] < got[0]  # it trains


def test_reduce_overhead_compile_trains_like_eager(patched):
    data = _batches(6)
    eager = _model("llama")
    patched.append(mytorch_ext.apply_to(eager))
    opt = _opt(eager)
    want = [_step(eager, opt, ids).item() for ids in data]

    model = _model("llama")
    patched.append(mytorch_ext.apply_to(model))
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = _opt(model)
    got = []
    for ids in data:
        loss = compiled(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        got.append(loss.item())
    torch._dynamo.reset()
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=2e-2, atol=2e-2)
