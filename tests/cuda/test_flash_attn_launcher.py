"""The C++ launch path of mytorch::flash_attn on CUDA (csrc/kernels/cuda/attention.cpp).

The op launches the compiled Triton kernels itself; only the first call of a launch
family runs the Python launcher (mytorch_ext/triton/launch_record.py). Checked here:
- every family's replay gives the bits the Python launcher gives (forward and backward;
  GQA, causal, windows, softcap, ALiBi, masks, dropout, varlen, head_dim 64 / 128 / 256;
  arguments that Triton specializes: a single head, unaligned views);
- a repeated call never enters Python;
- a training step's attention has no host synchronisation and replays in a CUDA graph, varlen
  included (its cu_seqlens are checked on the device).
"""
import pytest
import torch

from helpers import capture_cuda_graph, run_without_host_sync

GPU = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")

if GPU:
    import mytorch_ext  # noqa: F401
    from mytorch_ext.triton import flash_attn as fa
    from mytorch_ext.triton import launch_record

OPS = torch.ops.mytorch


def _qkv(B, n_q, n_k, H, HK, D, dtype=torch.bfloat16, offset=0):
    def make(n, h):
        # offset > 0: a view whose data pointer is not 16-byte aligned
        base = torch.randn(B * n * h * D + offset, dtype=dtype, device="cuda")
        return base[offset:].view(B, n, h, D)
    return make(n_q, H), make(n_k, HK), make(n_k, HK)


CASES = {
    "plain": dict(shape=(2, 128, 128, 8, 8, 64)),
    "gqa_causal": dict(shape=(2, 200, 200, 8, 2, 128), causal=True),
    "window_softcap": dict(shape=(1, 96, 160, 4, 4, 64), window_left=32, window_right=8, softcap=30.0),
    "alibi": dict(shape=(2, 64, 64, 4, 1, 64), alibi=True),
    "mask": dict(shape=(2, 48, 80, 4, 2, 64), mask=True),
    "dropout": dict(shape=(2, 64, 64, 4, 4, 64), dropout_p=0.2, seed=123456789),
    "dropout_seed_tensor": dict(shape=(2, 64, 64, 4, 2, 64), dropout_p=0.2, seed_tensor=987654321),
    "one_head": dict(shape=(1, 33, 33, 1, 1, 128), causal=True),
    "unaligned": dict(shape=(1, 40, 40, 2, 2, 64), offset=1),
    "head_dim_256": dict(shape=(1, 64, 64, 2, 2, 256), dtype=torch.float16),
    "fp32": dict(shape=(1, 40, 40, 2, 2, 32), dtype=torch.float32),
}


def _args(case):
    c = CASES[case]
    B, n_q, n_k, H, HK, D = c["shape"]
    q, k, v = _qkv(B, n_q, n_k, H, HK, D, c.get("dtype", torch.bfloat16), c.get("offset", 0))
    alibi = torch.rand(H, device="cuda") if c.get("alibi") else None
    mask = torch.rand(B, 1, n_q, n_k, device="cuda") > 0.3 if c.get("mask") else None
    return (q, k, v), dict(dropout_p=c.get("dropout_p", 0.0), softmax_scale=None,
                           causal=c.get("causal", False), window_left=c.get("window_left", -1),
                           window_right=c.get("window_right", -1), softcap=c.get("softcap", 0.0),
                           alibi_slopes=alibi, seed=c.get("seed", 0), attn_mask=mask,
                           seed_tensor=(torch.tensor([c["seed_tensor"]], device="cuda")
                                        if "seed_tensor" in c else None))


def _python(q, k, v, kw, g):
    scale = q.shape[-1] ** -0.5
    out, lse = fa.flash_attn_forward(
        q, k, v, softmax_scale=scale, causal=kw["causal"], window_left=kw["window_left"],
        window_right=kw["window_right"], softcap=kw["softcap"], alibi_slopes=kw["alibi_slopes"],
        dropout_p=kw["dropout_p"], seed=kw["seed"], attn_mask=kw["attn_mask"],
        seed_tensor=kw["seed_tensor"])
    grads = fa.flash_attn_backward(
        g, q, k, v, out, lse, softmax_scale=scale, causal=kw["causal"],
        window_left=kw["window_left"], window_right=kw["window_right"], softcap=kw["softcap"],
        alibi_slopes=kw["alibi_slopes"], dropout_p=kw["dropout_p"], seed=kw["seed"],
        attn_mask=kw["attn_mask"], seed_tensor=kw["seed_tensor"])
    return (out, lse, *grads)


def _cpp(q, k, v, kw, g):
    out, lse = OPS.flash_attn(q, k, v, **kw)
    grads = OPS.flash_attn_backward(
        g, q, k, v, out, lse, kw["dropout_p"], q.shape[-1] ** -0.5, kw["causal"],
        kw["window_left"], kw["window_right"], kw["softcap"], kw["alibi_slopes"], None, None, 0, 0,
        kw["seed"], False, kw["attn_mask"], kw["seed_tensor"])
    return (out, lse, *grads)


@pytest.mark.parametrize("case", list(CASES))
def test_replay_equals_python_launcher(case):
    (q, k, v), kw = _args(case)
    g = torch.randn_like(q)
    want = _python(q, k, v, kw, g)
    for _ in range(2):  # the first call records the plan, the second replays it
        got = _cpp(q, k, v, kw, g)
        for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
            assert torch.equal(a, b), f"{case}: {name} differs from the Python launcher"


def test_varlen_replay_equals_python_launcher():
    cu = torch.tensor([0, 17, 17, 90, 128], dtype=torch.int32, device="cuda")
    q = torch.randn(128, 8, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(128, 2, 64, dtype=torch.bfloat16, device="cuda")
    v = torch.randn_like(k)
    g = torch.randn_like(q)
    scale = 0.125
    want_o, want_l = fa.flash_attn_forward(q, k, v, softmax_scale=scale, causal=True, cu_seqlens_q=cu,
                                           cu_seqlens_k=cu, max_seqlen_q=73, max_seqlen_k=73)
    want = fa.flash_attn_backward(g, q, k, v, want_o, want_l, softmax_scale=scale, causal=True,
                                  cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=73, max_seqlen_k=73)
    for _ in range(2):
        o, l = OPS.flash_attn(q, k, v, softmax_scale=scale, causal=True, cu_seqlens_q=cu,
                              cu_seqlens_k=cu, max_seqlen_q=73, max_seqlen_k=73)
        grads = OPS.flash_attn_backward(g, q, k, v, o, l, 0.0, scale, True, -1, -1, 0.0, None, cu, cu,
                                        73, 73, 0, False, None)
        assert torch.equal(o, want_o) and torch.equal(l, want_l)
        for a, b in zip(grads, want):
            assert torch.equal(a, b)


def test_repeated_call_never_enters_python(monkeypatch):
    (q, k, v), kw = _args("gqa_causal")
    for t in (q, k, v):
        t.requires_grad_(True)
    out, _ = OPS.flash_attn(q, k, v, **kw)
    out.sum().backward()  # records the forward and backward plans

    def refuse(*args, **kwargs):
        raise AssertionError("a repeated call ran the Python launcher")

    monkeypatch.setattr(launch_record, "forward", refuse)
    monkeypatch.setattr(launch_record, "backward", refuse)
    monkeypatch.setattr(fa, "flash_attn_forward", refuse)
    monkeypatch.setattr(fa, "flash_attn_backward", refuse)
    out2, _ = OPS.flash_attn(q, k, v, **kw)
    out2.sum().backward()
    assert torch.equal(out, out2)


def test_no_host_sync_and_cuda_graph_replay():
    (q, k, v), kw = _args("gqa_causal")
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    g = torch.randn_like(q)

    def step():
        out, _ = OPS.flash_attn(q, k, v, **kw)
        return torch.autograd.grad(out, (q, k, v), g)

    eager = step()  # records the plans
    torch.cuda.synchronize()
    run_without_host_sync(step)
    graph, captured = capture_cuda_graph(step)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, eager):
        assert torch.equal(a, b)


def test_varlen_has_no_host_sync_and_replays_in_a_cuda_graph():
    """cu_seqlens are checked on the stream, so a varlen step (the public wrapper, forward and
    backward) reads nothing back, first call included, and replays in a CUDA graph."""
    cu = torch.tensor([0, 17, 17, 90, 128], dtype=torch.int32, device="cuda")
    q = torch.randn(128, 8, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    k = torch.randn(128, 2, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    v = torch.randn(128, 2, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    g = torch.randn_like(q)

    def step():
        out = mytorch_ext.flash_attn_varlen(q, k, v, cu, cu, 73, 73, causal=True, window_size=(40, 0))
        # out detached: a kept autograd graph would keep its AccumulateGrad nodes (made on the
        # default stream) alive into the capture
        return (out.detach(), *torch.autograd.grad(out, (q, k, v), g))

    torch.cuda.synchronize()
    eager = run_without_host_sync(step)  # the first call records the plans without a host read
    graph, captured = capture_cuda_graph(step)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, eager):
        assert torch.equal(a, b)


def test_seed_tensor_equals_int_seed():
    (q, k, v), kw = _args("dropout")
    g = torch.randn_like(q)
    by_int = _cpp(q, k, v, kw, g)
    by_tensor = _cpp(q, k, v, {**kw, "seed": 0, "seed_tensor": torch.tensor([kw["seed"]], device="cuda")}, g)
    for a, b in zip(by_int, by_tensor):
        assert torch.equal(a, b)


def test_dropout_in_a_cuda_graph_draws_a_new_mask_every_replay():
    """The seed is drawn inside the graph (as the public wrappers draw it): every replay uses a
    new one, and its forward and backward equal the eager op's with that seed."""
    q, k, v = (t.requires_grad_(True) for t in _args("dropout")[0])
    g = torch.randn_like(q)

    def step():
        seed = torch.randint(0, 1 << 62, (1,), dtype=torch.int64, device="cuda")
        out, _ = OPS.flash_attn(q, k, v, 0.3, None, True, seed_tensor=seed)
        return (seed, out, *torch.autograd.grad(out, (q, k, v), g))

    graph, captured = capture_cuda_graph(step)
    replays = []
    for _ in range(2):
        graph.replay()
        replays.append([t.clone() for t in captured])
    assert not torch.equal(replays[0][0], replays[1][0])
    assert not torch.equal(replays[0][1], replays[1][1])
    for seed, *got in replays:
        out, _ = OPS.flash_attn(q, k, v, 0.3, None, True, seed_tensor=seed)
        want = (out, *torch.autograd.grad(out, (q, k, v), g))
        for a, b in zip(got, want):
            assert torch.equal(a, b)
