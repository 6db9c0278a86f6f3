"""The dropout seed of mytorch::flash_attn as a tensor (seed_tensor): the public wrappers draw
it with torch.randint on q's device, so a compiled graph (and a CUDA graph) draws a new seed
every call instead of baking one in. CPU here; the CUDA kernels' side is in
tests/cuda/test_flash_attn_launcher.py."""
import pytest
import torch

import mytorch_ext

OPS = torch.ops.mytorch


def _qkv(grad=False):
    torch.manual_seed(0)
    return [torch.randn(2, 24, 4, 16, requires_grad=grad) for _ in range(3)]


def test_seed_tensor_equals_the_same_int_seed():
    q, k, v = _qkv(grad=True)
    seed = 987654321
    out_t, _ = OPS.flash_attn(q, k, v, 0.3, None, True, seed_tensor=torch.tensor([seed]))
    out_i, _ = OPS.flash_attn(q, k, v, 0.3, None, True, seed=seed)
    assert torch.equal(out_t, out_i)
    g = torch.randn_like(out_t)
    grads_t = torch.autograd.grad(out_t, (q, k, v), g)
    grads_i = torch.autograd.grad(out_i, (q, k, v), g)
    for a, b in zip(grads_t, grads_i):
        assert torch.equal(a, b)
    other, _ = OPS.flash_attn(q, k, v, 0.3, None, True, seed_tensor=torch.tensor([seed + 1]))
    assert not torch.equal(other, out_t)


def test_compiled_dropout_draws_a_new_seed_every_call():
    q, k, v = _qkv()
    f = torch.compile(lambda q, k, v: mytorch_ext.flash_attn(q, k, v, dropout_p=0.5, causal=True),
                      fullgraph=True, backend="aot_eager")
    a, b = f(q, k, v), f(q, k, v)
    assert not torch.equal(a, b)  # a seed baked into the graph would give the same mask twice
    # each call is a correct dropout attention: kept entries scaled by 1/(1-p), so the mean
    # over many draws approaches the dropout-free output
    mean = torch.stack([f(q, k, v) for _ in range(200)]).mean(0)
    plain = mytorch_ext.flash_attn(q, k, v, causal=True)
    assert (mean - plain).abs().mean() < 0.1 * plain.abs().mean()


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([1, 2]), "expected seed_tensor a one-element int64 tensor, got seed_tensor (2,) int64"),
    (torch.tensor([1.0]), "expected seed_tensor a one-element int64 tensor, got seed_tensor (1,) float32"),
])
def test_bad_seed_tensor(bad, message):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=f"mytorch::flash_attn: {message.replace('(', '[(]').replace(')', '[)]')}"):
        OPS.flash_attn(q, k, v, 0.1, seed_tensor=bad)
