"""mytorch::flash_attn inside PyTorch: opcheck, torch.compile, autocast, CUDA graphs,
checkpointing, memory, the tuning cache, and the errors bad input gets."""
import json

import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

from fa_ref import DEVICE, GPU, reference, rel, setup_ops

import mytorch_ext
from mytorch_ext.triton import flash_attn_config as cfg

OPS = setup_ops()


def _qkv(B=2, n_q=24, n_k=24, H=4, HK=2, D=16, dtype=torch.float16, grad=True):
    q = torch.randn(B, n_q, H, D, dtype=dtype, device=DEVICE, requires_grad=grad)
    k = torch.randn(B, n_k, HK, D, dtype=dtype, device=DEVICE, requires_grad=grad)
    v = torch.randn(B, n_k, HK, D, dtype=dtype, device=DEVICE, requires_grad=grad)
    return q, k, v


OPCHECK_CASES = {
    "plain": lambda q, k, v: ((q, k, v), {}),
    "causal_window_softcap": lambda q, k, v: (
        (q, k, v), {"causal": True, "window_left": 5, "softcap": 2.0, "softmax_scale": 0.2}),
    "alibi_deterministic": lambda q, k, v: (
        (q, k, v), {"alibi_slopes": torch.rand(q.shape[2], device=DEVICE), "deterministic": True}),
    "mask": lambda q, k, v: (
        (q, k, v), {"attn_mask": torch.rand(1, 1, q.shape[1], k.shape[1], device=DEVICE) > 0.2}),
}


@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck(case):
    """All of opcheck's checks: schema, autograd registration, fake tensor, AOT dispatch."""
    q, k, v = _qkv(n_q=20, n_k=28)
    args, kwargs = OPCHECK_CASES[case](q, k, v)
    torch.library.opcheck(OPS.flash_attn.default, args, kwargs)
    out, lse = OPS.flash_attn(*args, **kwargs)
    g = torch.randn_like(out)
    torch.library.opcheck(
        OPS.flash_attn_backward.default,
        (g, q.detach(), k.detach(), v.detach(), out.detach(), lse.detach(), 0.0, 0.25,
         kwargs.get("causal", False), kwargs.get("window_left", -1), -1, kwargs.get("softcap", 0.0),
         kwargs.get("alibi_slopes"), None, None, 0, 0, 0, False, kwargs.get("attn_mask")))


def test_opcheck_varlen():
    cu = torch.tensor([0, 7, 7, 20], dtype=torch.int32, device=DEVICE)
    q = torch.randn(20, 4, 16, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
    k = torch.randn(20, 2, 16, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
    torch.library.opcheck(OPS.flash_attn.default, (q, k, k),
                          {"cu_seqlens_q": cu, "cu_seqlens_k": cu, "max_seqlen_q": 13,
                           "max_seqlen_k": 13, "causal": True})


class Block(torch.nn.Module):
    """A pre-norm transformer block whose attention is mytorch's."""

    def __init__(self, dim=64, heads=4, kv_heads=2):
        super().__init__()
        self.h, self.kvh, self.d = heads, kv_heads, dim // heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, (heads + 2 * kv_heads) * self.d)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(2 * dim, dim))

    def forward(self, x):
        B, N, _ = x.shape
        qkv = self.qkv(self.norm1(x))
        q, k, v = qkv.split([self.h * self.d, self.kvh * self.d, self.kvh * self.d], -1)
        q = q.view(B, N, self.h, self.d)
        k = k.view(B, N, self.kvh, self.d)
        v = v.view(B, N, self.kvh, self.d)
        a = mytorch_ext.flash_attn(q, k, v, causal=True)
        x = x + self.proj(a.reshape(B, N, -1))
        return x + self.mlp(self.norm2(x))


def test_compile_fullgraph_block_matches_eager():
    torch._dynamo.reset()
    dt = torch.bfloat16
    block = Block().to(DEVICE, dt)
    x = torch.randn(2, 37, 64, device=DEVICE, dtype=dt, requires_grad=True)
    eager = block(x)
    eager.sum().backward()
    g_eager = x.grad.clone()
    x.grad = None
    compiled = torch.compile(block, fullgraph=True, backend="inductor" if GPU else "eager")
    out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(out, eager, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(x.grad, g_eager, atol=5e-2, rtol=5e-2)


def test_checkpoint_matches_plain_backward():
    q, k, v = _qkv()

    def f(q, k, v):
        return mytorch_ext.flash_attn(q, k, v, causal=True).float().square().sum()

    g1 = torch.autograd.grad(f(q, k, v), (q, k, v))
    loss = torch.utils.checkpoint.checkpoint(f, q, k, v, use_reentrant=False)
    g2 = torch.autograd.grad(loss, (q, k, v))
    for a, b in zip(g1, g2):
        assert torch.equal(a, b)


@pytest.mark.gpu
def test_autocast_casts_float32_inputs():
    q, k, v = _qkv(dtype=torch.float32, D=64)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = torch.ops.mytorch.flash_attn(q, k, v)[0]
        out2 = mytorch_ext.flash_attn(q, k, v)
    assert out.dtype == torch.bfloat16 and out2.dtype == torch.bfloat16
    out.float().sum().backward()
    assert q.grad.dtype == torch.float32
    ref, _ = reference(q.double(), k.double(), v.double())
    assert rel(out, ref) < 1e-2


@pytest.mark.gpu
def test_cuda_graph_replay():
    q, k, v = _qkv(B=2, n_q=300, n_k=300, D=64, grad=False)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            mytorch_ext.flash_attn(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mytorch_ext.flash_attn(q, k, v, causal=True)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        ref, _ = reference(q.double(), k.double(), v.double(), causal=True)
        assert rel(out, ref) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_no_quadratic_memory_at_16k(causal):
    B, N, H, D = 1, 16384, 16, 128
    q, k, v = _qkv(B, N, N, H, H, D, dtype=torch.bfloat16)
    g = torch.randn_like(q)
    mytorch_ext.flash_attn(q, k, v, causal=causal).backward(g)  # warm up (compile, autotune)
    q.grad = k.grad = v.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    mytorch_ext.flash_attn(q, k, v, causal=causal).backward(g)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    one = q.numel() * q.element_size()  # 64 MiB; an N^2 fp32 score matrix per head: 1 GiB
    assert extra < 10 * one, f"{extra / 2**20:.0f} MiB extra for {one / 2**20:.0f} MiB inputs"


def test_tuning_cache_is_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("MYTORCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cfg, "_cache", None)
    key = ("fwd", "bfloat16", 64, True, 4096)
    dev = torch.device(DEVICE)
    assert cfg.chosen(dev, ("fwd", "bfloat16", 64, True, 123)) is None
    choice = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}
    cfg.record(dev, key, choice)
    data = json.loads(open(cfg.cache_path()).read())
    assert list(data.values()) == [choice]
    monkeypatch.setattr(cfg, "_cache", None)  # a second process: reads the file
    assert cfg.chosen(dev, key) == choice


def _err(fn):
    try:
        fn()
    except (ValueError, RuntimeError) as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    raise AssertionError("no error")


class TestBadInput(TestCase):
    def setUp(self):
        self.q = torch.randn(2, 8, 4, 16, dtype=torch.float16, device=DEVICE)

    def call(self, q, k, v, **kw):
        return _err(lambda: OPS.flash_attn(q, k, v, **kw))

    def test_batch_mismatch(self):
        k = torch.randn(3, 8, 4, 16, dtype=torch.float16, device=DEVICE)
        self.assertExpectedInline(self.call(self.q, k, k), """ValueError: mytorch::flash_attn: expected q, k, v with the same batch size, got q (2, 8, 4, 16) float16, k (3, 8, 4, 16) float16, v (3, 8, 4, 16) float16""")

    def test_head_dim_mismatch(self):
        k = torch.randn(2, 8, 4, 24, dtype=torch.float16, device=DEVICE)
        self.assertExpectedInline(self.call(self.q, k, k), """ValueError: mytorch::flash_attn: expected q, k, v with the same head_dim, got q (2, 8, 4, 16) float16, k (2, 8, 4, 24) float16, v (2, 8, 4, 24) float16""")

    def test_heads_do_not_divide(self):
        k = torch.randn(2, 8, 3, 16, dtype=torch.float16, device=DEVICE)
        self.assertExpectedInline(self.call(self.q, k, k), """ValueError: mytorch::flash_attn: expected the heads of k, v to divide the heads of q, got 4 and 3 (q (2, 8, 4, 16) float16, k (2, 8, 3, 16) float16, v (2, 8, 3, 16) float16)""")

    def test_head_dim_too_large_or_not_multiple_of_8(self):
        q = torch.randn(1, 4, 1, 264, dtype=torch.float16, device=DEVICE)
        self.assertExpectedInline(self.call(q, q, q), """ValueError: mytorch::flash_attn: expected head_dim a multiple of 8 in [8, 256], got 264 (q (1, 4, 1, 264) float16, k (1, 4, 1, 264) float16, v (1, 4, 1, 264) float16)""")
        q = torch.randn(1, 4, 1, 20, dtype=torch.float16, device=DEVICE)
        self.assertExpectedInline(self.call(q, q, q), """ValueError: mytorch::flash_attn: expected head_dim a multiple of 8 in [8, 256], got 20 (q (1, 4, 1, 20) float16, k (1, 4, 1, 20) float16, v (1, 4, 1, 20) float16)""")

    def test_dtypes(self):
        for dt in (torch.int32, torch.float64):
            x = self.q.to(dt)
            msg = self.call(x, x, x)
            self.assertIn("expected q, k, v of dtype float16, bfloat16 or float32", msg)
        self.assertExpectedInline(self.call(self.q.to(torch.float64), self.q, self.q), """ValueError: mytorch::flash_attn: expected q, k, v of dtype float16, bfloat16 or float32, got q (2, 8, 4, 16) float64, k (2, 8, 4, 16) float16, v (2, 8, 4, 16) float16""")
        self.assertExpectedInline(self.call(self.q.bfloat16(), self.q, self.q), """ValueError: mytorch::flash_attn: expected q, k, v of one dtype, got q (2, 8, 4, 16) bfloat16, k (2, 8, 4, 16) float16, v (2, 8, 4, 16) float16""")

    def test_devices(self):
        other = torch.device("meta")
        msg = self.call(self.q, self.q.to(other), self.q)
        self.assertIn(f"expected q, k, v on one device, got q on {self.q.device}, k on meta", msg)

    def test_last_dim_not_contiguous(self):
        k = torch.randn(2, 8, 4, 32, dtype=torch.float16, device=DEVICE)[..., ::2]
        self.assertExpectedInline(self.call(self.q, k, self.q), """ValueError: mytorch::flash_attn: expected k with a contiguous last dim, got strides (1024, 128, 32, 2)""")

    @pytest.mark.skipif(GPU, reason="CUDA checks cu_seqlens values on the device, without a host read: "
                                    "tests/cuda/test_device_side_checks.py")
    def test_cu_seqlens(self):
        q = torch.randn(10, 2, 16, dtype=torch.float16, device=DEVICE)

        def varlen(cu, max_len=10):
            cu = torch.tensor(cu, dtype=torch.int32, device=DEVICE)
            return _err(lambda: OPS.flash_attn(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                               max_seqlen_q=max_len, max_seqlen_k=max_len))

        self.assertExpectedInline(varlen([0, 6, 4, 10]), """ValueError: mytorch::flash_attn: expected cu_seqlens_q to start at 0 and never decrease, got [0, 6, 4, 10]""")
        self.assertExpectedInline(varlen([0, 4, 9]), """ValueError: mytorch::flash_attn: expected cu_seqlens_q[-1] == q.shape[0], got 9 and 10 (q (10, 2, 16) float16)""")
        self.assertExpectedInline(varlen([0, 4, 10], 5), """ValueError: mytorch::flash_attn: expected max_seqlen_q >= the longest sequence, got 5 < 6""")

    def test_sdpa_gqa_needs_flag(self):
        q = torch.randn(1, 4, 8, 16, dtype=torch.float16, device=DEVICE)
        k = torch.randn(1, 2, 8, 16, dtype=torch.float16, device=DEVICE)
        self.assertExpectedInline(_err(lambda: mytorch_ext.scaled_dot_product_attention(q, k, k)), """ValueError: mytorch.scaled_dot_product_attention: query has 4 heads and key 2: pass enable_gqa=True""")


def test_sdpa_wrapper_matches_torch_sdpa_plain():
    q, k, v = (torch.randn(2, 3, 29, 16, dtype=torch.float16, device=DEVICE) for _ in range(3))
    out = mytorch_ext.scaled_dot_product_attention(q, k, v, scale=0.3)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), scale=0.3)
    assert rel(out, ref) < 2e-3
