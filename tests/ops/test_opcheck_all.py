"""Every registered mytorch:: op passes torch.library.opcheck on at least one sample.

SAMPLES maps each op to a function that builds its sample calls, fresh each time:
a list of (args, kwargs). The coverage test reads the registered op list, so an op
added without a sample here fails it. NOT_OPCHECKED lists ops that cannot be opchecked,
each with its reason.
"""
import pytest
import torch

import mytorch_ext  # noqa: F401  registers the ops

M = torch.ops.mytorch


def r(*shape, grad=False, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def pos(*shape, grad=False):
    return (torch.rand(*shape) + 0.2).requires_grad_(grad)


def call(*args, **kwargs):
    return args, kwargs


def _binary(name):
    return lambda: [call(r(3, 4, grad=True), r(4, grad=True))]


def _compare(name):
    return lambda: [call(r(3, 4), r(4))]


def _unary(name, positive=False):
    return lambda: [call(pos(2, 5, grad=True) if positive else r(2, 5, grad=True))]


def _act_backward(forward_of=None):
    def make():
        x = r(3, 5)
        y = forward_of(x) if forward_of else x
        return [call(r(3, 5), y)]
    return make


def _layer_norm_backward():
    x = r(4, 3, 6)
    _, mean, rstd = M.layer_norm(x, [6], None, None, 1e-5)
    return [call(r(4, 3, 6), x, [6], mean, rstd, r(6))]


def _rms_norm_backward():
    x = r(4, 3, 6)
    _, rstd = M.rms_norm(x, [6], None, 1e-6)
    return [call(r(4, 3, 6), x, [6], rstd, None)]


def _softmax_backward(fwd):
    def make():
        y = fwd(r(3, 7, 2), 1)
        return [call(r(3, 7, 2), y, 1)]
    return make


def _max_pool2d_backward():
    x = r(2, 3, 9, 8)
    _, idx = M.max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
    return [call(r(*idx.shape), x, idx)]


def _batch_norm_update_stats():
    x = r(4, 3, 5, 2)
    _, sm, si = M.batch_norm(x, None, None, None, None, True, 1e-5)
    return [call(r(3), pos(3), sm, si, 0.1, 1e-5, 40)]


def _batch_norm_backward():
    x = r(4, 3, 5, 2)
    _, sm, si = M.batch_norm(x, None, None, None, None, True, 1e-5)
    return [call(r(4, 3, 5, 2), x, r(3), r(3), pos(3), sm, si, True, 1e-5, [True, True, True]),
            call(r(4, 3, 5, 2), x, None, r(3), pos(3), None, None, False, 1e-5, [True, False, False])]


def _fused_cross_entropy_backward():
    x, t = r(4, 12), torch.tensor([1, -100, 11, 0])
    _, lse = M.fused_cross_entropy(x, t)
    return [call(torch.tensor(1.0), x, t, lse, -100, 0.0, "mean")]


def _nll_loss_backward():
    x, t, w = torch.log_softmax(r(6, 5), 1), torch.tensor([0, 4, 1, -100, 2, 3]), pos(5)
    _, tw = M.nll_loss(x, t, w, 1, -100)
    return [call(torch.tensor(1.0), x, t, w, 1, -100, tw)]


def _rope_tables(seq=3, half=4):
    ang = torch.arange(seq).float()[:, None] * torch.rand(half)[None]
    return ang.cos(), ang.sin()


def _flash_attn():
    q, k, v = (r(2, 5, 2, 8, grad=True) for _ in range(3))
    return [call(q, k, v, causal=True)]


def _flash_attn_backward():
    q, k, v = (r(2, 5, 2, 8) for _ in range(3))
    out, lse = M.flash_attn(q, k, v)
    return [call(r(2, 5, 2, 8), q, k, v, out, lse, 0.0, 8 ** -0.5, False, -1, -1, 0.0, None, None, None,
                 0, 0, 0, False)]


def _flash_attn_with_kvcache():
    # decode step with a new token appended (rotary), then a paged prefill chunk
    q, kc, vc, k, v = r(2, 1, 4, 8), r(2, 6, 2, 8), r(2, 6, 2, 8), r(2, 1, 2, 8), r(2, 1, 2, 8)
    cos, sin = _rope_tables(seq=7, half=2)
    seqlens = torch.tensor([3, 5], dtype=torch.int32)
    pages = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    return [call(q, kc, vc, k, v, cos, sin, seqlens, causal=True),
            call(r(2, 3, 4, 8), r(4, 16, 2, 8), r(4, 16, 2, 8), r(2, 3, 2, 8), r(2, 3, 2, 8),
                 cache_seqlens=seqlens, block_table=pages, causal=True, num_splits=2)]


def _opt_state(n):
    return [[torch.zeros(5), torch.zeros(3, 2)] for _ in range(n)]


SAMPLES = {
    # elementwise
    **{n: _binary(n) for n in ("add", "sub", "mul", "maximum", "minimum")},
    "div": lambda: [call(r(3, 4, grad=True), pos(4, grad=True)), call(r(3, 4), pos(4), "floor")],
    "pow": lambda: [call(pos(2, 5, grad=True), r(2, 5, grad=True))],
    **{n: _compare(n) for n in ("eq", "ne", "lt", "le", "gt", "ge")},
    "where": lambda: [call(torch.rand(3, 1) > 0.5, r(3, 4, grad=True), r(4, grad=True))],
    **{n: _unary(n) for n in ("neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu")},
    **{n: _unary(n, positive=True) for n in ("log", "sqrt", "rsqrt", "reciprocal")},
    "sigmoid_backward": _act_backward(torch.sigmoid),
    "tanh_backward": _act_backward(torch.tanh),
    "silu_backward": _act_backward(),
    "threshold_backward": lambda: [call(r(3, 5), r(3, 5), 0.0)],
    "clamp": lambda: [call(r(3, 5, grad=True), -0.5, 0.5), call(r(3, 5), None, 0.1)],
    "clamp_tensor": lambda: [call(r(3, 5), r(5) - 1, r(3, 1) + 1)],
    "masked_fill": lambda: [call(r(3, 5, grad=True), torch.rand(5) > 0.5, 2.0)],
    "addcmul": lambda: [call(r(3, 4, grad=True), r(4, grad=True), r(3, 1, grad=True), 2)],
    "addcdiv": lambda: [call(r(3, 4, grad=True), r(4, grad=True), pos(3, 1, grad=True), 0.5)],
    "lerp": lambda: [call(r(3, 4, grad=True), r(3, 4, grad=True), torch.rand(4, requires_grad=True))],
    "cast": lambda: [call(r(3, 4, grad=True), torch.bfloat16), call(r(3, 4), torch.int64)],
    # activations and fused
    "gelu": lambda: [call(r(3, 7, grad=True), "tanh"), call(r(3, 7, grad=True))],
    "gelu_backward": lambda: [call(r(3, 7), r(3, 7), "none")],
    "hardswish": _unary("hardswish"),
    "hardsigmoid": _unary("hardsigmoid"),
    "hardswish_backward": _act_backward(),
    "hardsigmoid_backward": _act_backward(),
    "bias_gelu": lambda: [call(r(4, 12, grad=True), r(12, grad=True), "tanh")],
    "bias_gelu_backward": lambda: [call(r(4, 12), r(4, 12), r(12), "none")],
    "swiglu": lambda: [call(r(4, 12, grad=True), r(4, 12, grad=True))],
    "swiglu_backward": lambda: [call(r(4, 12), r(4, 12), r(4, 12))],
    "rope": lambda: [call(r(2, 3, 2, 8, grad=True), *_rope_tables(), False),
                     call(r(2, 3, 2, 8, grad=True), *_rope_tables(3, 2), True)],
    "scale_": lambda: [call(r(3, 4), torch.tensor(2.5)), call(r(3, 4), torch.tensor([1.0]))],
    "rope_": lambda: [call(r(2, 3, 2, 8), *_rope_tables(), False)],
    "rope_backward": lambda: [call(r(2, 3, 2, 8), *_rope_tables(), True)],
    # reductions
    "sum": lambda: [call(r(3, 4, 5, grad=True), [1], True), call(r(3, 4, 5, grad=True))],
    "mean": lambda: [call(r(3, 4, 5, grad=True), [0, 2])],
    "prod": lambda: [call(r(3, 4, 5), [1])],
    "amax": lambda: [call(r(3, 4, 5, grad=True), [1])],
    "amin": lambda: [call(r(3, 4, 5, grad=True), [])],
    "max_dim": lambda: [call(r(3, 4, 5, grad=True), 2)],
    "min_dim": lambda: [call(r(3, 4, 5, grad=True), 0, True)],
    "argmax": lambda: [call(r(3, 4, 5), 1)],
    "argmin": lambda: [call(r(3, 4, 5))],
    "var": lambda: [call(r(3, 4, 5, grad=True), [1], 1.0)],
    "std": lambda: [call(r(3, 4, 5, grad=True), None, 0.0, True)],
    "logsumexp": lambda: [call(r(3, 4, 5, grad=True), [2])],
    # indexing
    "index_select": lambda: [call(r(5, 4, grad=True), 0, torch.tensor([3, 0, 3]))],
    "gather": lambda: [call(r(5, 4, grad=True), 0, torch.tensor([[0, 3, 1, 1], [2, 2, 4, 0]]))],
    "scatter_add": lambda: [call(r(5, 4, grad=True), 0, torch.tensor([[0, 3, 1, 1], [2, 2, 4, 0]]),
                                 r(2, 4, grad=True))],
    "index": lambda: [call(r(5, 4, grad=True), [torch.tensor([3, 0, 3])]),
                      call(r(5, 4), [None, torch.tensor([1, 2])])],
    "index_put": lambda: [call(r(5, 4), [torch.tensor([3, 0, 3])], r(3, 4), True)],
    "cat": lambda: [call([r(5, 4, grad=True), r(5, 2, grad=True)], 1)],
    "nonzero": lambda: [call(torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]))],
    # GEMM
    "mm": lambda: [call(r(4, 5, grad=True), r(5, 3, grad=True))],
    "bmm": lambda: [call(r(2, 3, 5, grad=True), r(2, 5, 4, grad=True))],
    "addmm": lambda: [call(r(4, grad=True), r(3, 5, grad=True), r(5, 4, grad=True), beta=0.5, alpha=2)],
    "baddbmm": lambda: [call(r(2, 3, 4, grad=True), r(2, 3, 5, grad=True), r(2, 5, 4, grad=True), alpha=0.3)],
    "linear": lambda: [call(r(2, 3, 5, grad=True), r(4, 5, grad=True), r(4, grad=True)),
                       call(r(3, 5), r(4, 5), None)],
    # softmax, norms, losses
    "softmax": lambda: [call(r(3, 7, 2, grad=True), 1)],
    "log_softmax": lambda: [call(r(3, 7, 2, grad=True), -1)],
    "softmax_backward": _softmax_backward(M.softmax),
    "log_softmax_backward": _softmax_backward(M.log_softmax),
    "layer_norm": lambda: [call(r(4, 3, 6, grad=True), [6], r(6, grad=True), r(6, grad=True), 1e-5),
                           call(r(4, 3, 6, grad=True), [3, 6], None, None, 1e-3)],
    "layer_norm_backward": _layer_norm_backward,
    "rms_norm": lambda: [call(r(4, 3, 6, grad=True), [6], r(6, grad=True), 1e-6)],
    "rms_norm_backward": _rms_norm_backward,
    "cross_entropy": lambda: [call(r(6, 5, grad=True), torch.tensor([0, 4, 1, -100, 2, 3]), pos(5), 1, -100, 0.1)],
    "cross_entropy_backward": lambda: [call(r(6), r(6, 5), torch.tensor([0, 4, 1, -100, 2, 3]), None, 0, -100,
                                            0.0)],
    "nll_loss": lambda: [call(r(6, 5, grad=True), torch.tensor([0, 4, 1, -100, 2, 3]), pos(5), 2, -100)],
    "nll_loss_backward": _nll_loss_backward,
    "mse_loss": lambda: [call(r(6, 5, grad=True), r(6, 5, grad=True), 1)],
    "mse_loss_backward": lambda: [call(torch.tensor(2.0), r(6, 5), r(6, 5), 2)],
    "fused_cross_entropy": lambda: [call(r(4, 12, grad=True), torch.tensor([1, -100, 11, 0]), -100, 0.1, "mean"),
                                    call(r(4, 12, grad=True), torch.tensor([1, 2, 11, 0]), -100, 0.0, "none")],
    "fused_cross_entropy_backward": _fused_cross_entropy_backward,
    "fused_cross_entropy_grad": lambda: [call(r(4, 12, grad=True), torch.tensor([1, -100, 11, 0]), -100, 0.1, "mean"),
                                         call(r(4, 12, grad=True), torch.tensor([1, 2, 11, 0]), -100, 0.0, "sum"),
                                         call(r(4, 12, grad=True), torch.tensor([1, 2, 11, 0]), -100, 0.0, "sum",
                                              torch.tensor(3))],
    "fused_linear_cross_entropy": lambda: [call(r(4, 12, grad=True), r(5, 12, grad=True),
                                                torch.tensor([0, 4, -100, 2]), -100, 0.0, "mean", 2),
                                           call(r(4, 12, grad=True), r(5, 12, grad=True),
                                                torch.tensor([0, 4, -100, 2]), -100, 0.0, "mean", 0,
                                                torch.tensor(2.5))],
    # embedding, dropout
    "embedding": lambda: [call(r(6, 4, grad=True), torch.tensor([[1, 0, 5], [5, 5, 2]]), 5)],
    "embedding_backward": lambda: [call(r(2, 3, 4), torch.tensor([[1, 0, 5], [5, 5, 2]]), 6, 0, False)],
    "dropout": lambda: [call(r(4, 6, grad=True), 0.4, True, None)],
    "dropout_backward": lambda: [call(r(4, 6), torch.rand(4, 6) > 0.4, 2.0)],
    # vision
    "conv2d": lambda: [call(r(2, 4, 7, 6, grad=True), r(6, 2, 3, 3, grad=True), r(6, grad=True),
                            [2, 1], [1, 1], [1, 1], 2)],
    "conv2d_backward": lambda: [call(r(2, 6, 4, 6), r(2, 4, 7, 6), r(6, 2, 3, 3), [2, 1], [1, 1], [1, 1], 2,
                                     [True, True, True])],
    "conv1d": lambda: [call(r(2, 3, 9, grad=True), r(4, 3, 3, grad=True), None, [1], [1], [1], 1)],
    "conv1d_backward": lambda: [call(r(2, 4, 9), r(2, 3, 9), r(4, 3, 3), [1], [1], [1], 1,
                                     [True, True, False])],
    "max_pool2d": lambda: [call(r(2, 3, 9, 8, grad=True), [3, 3], [2, 2], [1, 1], [1, 1], True)],
    "max_pool2d_backward": _max_pool2d_backward,
    "avg_pool2d": lambda: [call(r(2, 3, 9, 8, grad=True), [3, 2], [2, 1], [1, 1], False, True, None)],
    "avg_pool2d_backward": lambda: [call(r(2, 3, 5, 9), r(2, 3, 9, 8), [3, 2], [2, 1], [1, 1], False, True,
                                         None)],
    "adaptive_avg_pool2d": lambda: [call(r(2, 3, 9, 8, grad=True), [4, 3])],
    "adaptive_avg_pool2d_backward": lambda: [call(r(2, 3, 4, 3), r(2, 3, 9, 8))],
    "batch_norm": lambda: [call(r(4, 3, 5, 2, grad=True), r(3, grad=True), r(3, grad=True), r(3), pos(3),
                                True, 1e-5),
                           call(r(4, 3, 5, 2, grad=True), None, None, r(3), pos(3), False, 1e-5)],
    "batch_norm_update_stats_": _batch_norm_update_stats,
    "batch_norm_backward": _batch_norm_backward,
    "upsample_nearest2d": lambda: [call(r(2, 3, 4, 5, grad=True), [7, 9], None, None)],
    "upsample_nearest2d_backward": lambda: [call(r(2, 3, 7, 9), [2, 3, 4, 5], None, None)],
    "upsample_bilinear2d": lambda: [call(r(2, 3, 4, 5, grad=True), [8, 10], False, 2.0, 2.0)],
    "upsample_bilinear2d_backward": lambda: [call(r(2, 3, 8, 10), [2, 3, 4, 5], True, None, None)],
    # attention
    "flash_attn": _flash_attn,
    "flash_attn_backward": _flash_attn_backward,
    "flash_attn_with_kvcache": _flash_attn_with_kvcache,
    # optimizers
    "sgd_step_": lambda: [call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(1), 0.1, 0.9)],
    "adam_step_": lambda: [call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(2), [],
                                [torch.tensor(1.0), torch.tensor(1.0)], 0.01)],
    "fused_adamw_": lambda: [call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(2), 1e-3, 0.9, 0.999, 0.01,
                                  1e-8, 1)],
    "fused_sgd_": lambda: [call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(1), 0.1, 0.9, 0.0, 0.0, False,
                                True)],
}

# Ops that cannot be opchecked, with the reason. Empty today: keep it that way where possible.
NOT_OPCHECKED: dict[str, str] = {}


def registered_ops():
    return sorted(n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("mytorch::"))


def test_every_registered_op_has_a_sample():
    ops = set(registered_ops())
    assert len(ops) > 100  # the registry was read
    missing = sorted(ops - SAMPLES.keys() - NOT_OPCHECKED.keys())
    assert not missing, f"mytorch:: ops with no opcheck sample in this file: {missing}"
    stale = sorted((SAMPLES.keys() | NOT_OPCHECKED.keys()) - ops)
    assert not stale, f"samples or exemptions for ops that are not registered: {stale}"
    both = sorted(SAMPLES.keys() & NOT_OPCHECKED.keys())
    assert not both, f"ops both sampled and exempted: {both}"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_opcheck(name):
    op = getattr(M, name).default
    samples = SAMPLES[name]()
    assert samples
    for args, kwargs in samples:
        torch.library.opcheck(op, args, kwargs)
