"""mytorch::flash_attn_fp8 and mytorch_ext.quantize_fp8 on the CPU: the op against a float64
reference of its dequantized inputs (GQA/MQA, causal, windows, softcap, per-head and
per-tensor descales, odd lengths), the quantizer's error and the Hadamard rotation's
invariance, the rotation's gain on inputs with an outlier channel, opcheck, torch.compile,
the fake kernel, and the errors bad input gets (the Hopper kernel's checks are
tests/cuda/test_attention_fp8_cuda.py)."""
import pytest
import torch
from torch.library import opcheck

from helpers import attention_reference

import mytorch_ext
from mytorch_ext.ops.attention_fp8 import FP8, FP8_MAX, _rotation, flash_attn_fp8, quantize_fp8

OP = torch.ops.mytorch.flash_attn_fp8


def dequantize(x8, descale, heads_k):
    b, n, h, d = x8.shape
    ds = descale.double().expand(b, heads_k).repeat_interleave(h // heads_k, 1)
    return x8.double() * ds.view(b, 1, h, 1)


def inputs(b=2, nq=37, nk=53, h=4, hk=2, d=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, n, hh, d, generator=g) for n, hh in ((nq, h), (nk, hk), (nk, hk)))


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("shape", [(2, 37, 53, 4, 2), (1, 64, 20, 3, 1), (3, 1, 100, 2, 2)])
@pytest.mark.parametrize("mask", ["none", "causal", "window", "softcap"])
@pytest.mark.parametrize("per_head", [True, False])
def test_matches_float64_of_the_dequantized_inputs(d, shape, mask, per_head):
    b, nq, nk, h, hk = shape
    q8, k8, v8, qd, kd, vd = quantize_fp8(*inputs(b, nq, nk, h, hk, d), per_head=per_head)
    assert qd.shape == ((b, hk) if per_head else (1, 1)) and qd.dtype == torch.float32
    kw = {"none": {}, "causal": {"causal": True}, "window": {"window_size": (9, 3)},
          "softcap": {"softcap": 5.0, "causal": True}}[mask]
    out, lse = flash_attn_fp8(q8, k8, v8, qd, kd, vd, return_softmax_lse=True, **kw)
    o_ref, lse_ref, _ = attention_reference(
        dequantize(q8, qd, hk), dequantize(k8, kd, hk), dequantize(v8, vd, hk), d ** -0.5,
        kw.get("causal", False), *kw.get("window_size", (-1, -1)), kw.get("softcap", 0.0))
    assert out.dtype == torch.bfloat16 and out.shape == (b, nq, h, d)
    assert lse.dtype == torch.float32 and lse.shape == (b, h, nq)
    fin = torch.isfinite(lse_ref)
    torch.testing.assert_close(out.double(), o_ref, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(lse.double()[fin], lse_ref[fin], atol=1e-4, rtol=1e-4)
    assert bool((lse[~fin] == float("inf")).all()) and bool((out.transpose(1, 2)[~fin] == 0).all())


def test_no_backward():
    """A forward-only op: a descale that needs a gradient gives an output whose backward
    raises, naming the op, rather than gradients left silently empty."""
    q8, k8, v8, qd, kd, vd = quantize_fp8(*inputs(), per_head=False)
    out = flash_attn_fp8(q8, k8, v8, qd, kd, vd.requires_grad_(True))
    with pytest.raises(RuntimeError, match="derivative for mytorch::flash_attn_fp8 is not implemented"):
        out.float().sum().backward()
    assert vd.grad is None


def test_descales_scale_the_result():
    """Descales enter as x = x_fp8 * descale: doubling v's descale doubles the output, and a
    per-tensor descale equals the same value given per head."""
    q8, k8, v8, qd, kd, vd = quantize_fp8(*inputs(), per_head=False)
    out = flash_attn_fp8(q8, k8, v8, qd, kd, vd)
    torch.testing.assert_close(flash_attn_fp8(q8, k8, v8, qd, kd, vd * 2).float(),
                               out.float() * 2, atol=0, rtol=0)
    torch.testing.assert_close(flash_attn_fp8(q8, k8, v8, qd.expand(2, 2), kd.reshape(1),
                                              vd.reshape(())), out, atol=0, rtol=0)


@pytest.mark.parametrize("per_head", [True, False])
def test_quantize_rounds_within_float8_precision(per_head):
    q, k, v = inputs(seed=3)
    q[1] *= 50  # one sequence much larger: per head keeps the other's precision
    q8, k8, v8, qd, kd, vd = quantize_fp8(q, k, v, per_head=per_head)
    assert q8.dtype == k8.dtype == v8.dtype == FP8
    for x, x8, ds in ((q, q8, qd), (k, k8, kd), (v, v8, vd)):
        y = dequantize(x8, ds, 2)
        # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 for normal numbers, and values
        # below the smallest normal (2^-6 of the scale step) round to an absolute step
        step = ds.double().expand(2, 2).repeat_interleave(x.shape[2] // 2, 1).view(2, 1, -1, 1)
        assert bool(((y - x.double()).abs() <= x.double().abs() * 2 ** -4 + step * 2 ** -9).all())
        assert x8.float().abs().max() <= FP8_MAX


def test_per_head_descales_keep_a_small_sequence_precise():
    q, k, v = inputs(seed=3)
    q[1] *= 3e4  # the other sequence lands among float8 subnormals under one scale

    def rel(per_head):
        q8, _, _, qd, _, _ = quantize_fp8(q, k, v, per_head=per_head)
        small = dequantize(q8, qd, 2)[0]
        return ((small - q[0].double()).abs() / q[0].double().abs().clamp_min(1e-3)).median()
    assert rel(True) < 0.04 < 4 * rel(True) < rel(False)


def test_hadamard_rotation_is_orthogonal_and_keeps_scores():
    q, k, v = inputs(seed=4)
    for d in (64, 128):
        r = _rotation(d, 0, torch.device("cpu")).double()
        torch.testing.assert_close(r @ r.T, torch.eye(d, dtype=torch.float64), atol=1e-6, rtol=0)
    r = _rotation(64, 0, torch.device("cpu")).double()
    qd, kd = q[:, :, :2].double().transpose(1, 2), k.double().transpose(1, 2)
    torch.testing.assert_close((qd @ r) @ (kd @ r).transpose(-1, -2), qd @ kd.transpose(-1, -2))
    # through the op: on Gaussian inputs the rotated quantization errs no more than the plain
    o_ref, _, _ = attention_reference(q, k, v, 64 ** -0.5)

    def rms(**kw):
        return (flash_attn_fp8(*quantize_fp8(q, k, v, **kw)).double() - o_ref).pow(2).mean().sqrt()
    assert rms(hadamard=True) < 1.5 * rms() < 0.05


def test_hadamard_lowers_the_error_with_an_outlier_channel():
    q, k, v = inputs(b=1, nq=128, nk=128, h=2, hk=2, seed=5)
    q[..., 7] *= 20
    k[..., 7] *= 20
    o_ref, _, _ = attention_reference(q, k, v, 64 ** -0.5, causal=True)

    def err(**kw):
        return (flash_attn_fp8(*quantize_fp8(q, k, v, **kw), causal=True).double()
                - o_ref).pow(2).mean().sqrt().item()
    assert err(hadamard=True) < 0.5 * err()


def test_opcheck_and_compile():
    q8, k8, v8, qd, kd, vd = quantize_fp8(*inputs(nq=16, nk=24))
    args = (q8, k8, v8, qd, kd, vd)
    # opcheck's schema test compares inputs with allclose, which float8 lacks on the CPU;
    # that the op mutates nothing is checked bitwise below instead
    opcheck(OP, args, {"causal": True},
            test_utils=("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"))
    before = [t.view(torch.uint8).clone() if t.dtype == FP8 else t.clone() for t in args]
    OP(*args, causal=True)
    for t, b in zip(args, before):
        assert torch.equal(t.view(torch.uint8) if t.dtype == FP8 else t, b)
    f = torch.compile(lambda *a: flash_attn_fp8(*a, causal=True), fullgraph=True, backend="eager")
    torch.testing.assert_close(f(*args), flash_attn_fp8(*args, causal=True))


def test_fake_kernel_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q8, k8, v8, qd, kd, vd = quantize_fp8(*inputs(b=3, nq=5, nk=7, h=6, hk=3))
        out, lse = OP(q8, k8, v8, qd, kd, vd)
    assert out.shape == (3, 5, 6, 64) and out.dtype == torch.bfloat16
    assert lse.shape == (3, 6, 5) and lse.dtype == torch.float32


def _bad(**over):
    q8, k8, v8, qd, kd, vd = quantize_fp8(*inputs())
    a = dict(q=q8, k=k8, v=v8, q_descale=qd, k_descale=kd, v_descale=vd)
    a.update(over)
    return a


@pytest.mark.parametrize("over, match", [
    ({"q_descale": None, "v_descale": None},
     r"float8 inputs need q_descale, k_descale and v_descale .*got none for q_descale, v_descale"),
    ({"q": torch.randn(2, 37, 4, 64, dtype=torch.bfloat16)},
     r"expected q, k, v all float8_e4m3fn, got q \(2, 37, 4, 64\) bfloat16"),
    ({"q": torch.randn(2, 37, 4, 96).to(FP8), "k": torch.randn(2, 53, 2, 96).to(FP8),
      "v": torch.randn(2, 53, 2, 96).to(FP8)},
     r"head_dim 96 is not supported in float8; accepted: 64, 128"),
    ({"k_descale": torch.ones(2, 4)}, r"expected k_descale float32 of shape \(2, 2\).*got k_descale \(2, 4\)"),
    ({"v_descale": torch.ones(2, 2, dtype=torch.float16)}, r"expected v_descale float32.*float16"),
    ({"v": torch.randn(2, 50, 2, 64).to(FP8)}, r"expected k and v of one shape"),
    ({"q": torch.randn(2, 37, 3, 64).to(FP8)}, r"expected q's heads a multiple of k's"),
    ({"q": torch.randn(37, 4, 64).to(FP8)}, r"expected q, k, v of layout \(batch, seqlen, heads"),
])
def test_bad_input_names_what_it_got(over, match):
    a = _bad(**over)
    with pytest.raises(ValueError, match=r"mytorch::flash_attn_fp8: " + match):
        OP(*a.values())
    with pytest.raises(ValueError, match=match):  # the fake kernel says the same
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode(allow_non_fake_inputs=True):
            OP(*a.values())


def test_float_inputs_point_to_flash_attn():
    q, k, v = inputs()
    with pytest.raises(ValueError, match=r"float16/bfloat16/float32 inputs go to mytorch::flash_attn"):
        flash_attn_fp8(q, k, v, torch.ones(1), torch.ones(1), torch.ones(1))


def test_quantize_rejects_what_it_cannot_rotate():
    q = torch.randn(1, 4, 2, 96)
    with pytest.raises(ValueError, match=r"quantize_fp8: hadamard needs a power-of-two head_dim, got 96"):
        quantize_fp8(q, q, q, hadamard=True)
    with pytest.raises(ValueError, match=r"quantize_fp8: expected q, k, v \(batch, seqlen"):
        quantize_fp8(q, q[:, :3], q)


def test_public_api():
    assert mytorch_ext.flash_attn_fp8 is flash_attn_fp8
    assert mytorch_ext.quantize_fp8 is quantize_fp8


def test_mytorch_device_runs_it_natively():
    a = quantize_fp8(*inputs())
    mytorch_ext.reset_fallback_counts()
    out = flash_attn_fp8(*(t.to("mytorch") for t in a), causal=True)
    assert out.device.type == "mytorch" and mytorch_ext.fallback_counts() == {}
    torch.testing.assert_close(out.cpu(), flash_attn_fp8(*a, causal=True), atol=0, rtol=0)


def test_flash_attn_points_float8_inputs_here():
    q8, k8, v8, *_ = quantize_fp8(*inputs())
    with pytest.raises(ValueError, match=r"mytorch::flash_attn: .*float8_e4m3fn inputs go to "
                                         r"mytorch::flash_attn_fp8"):
        mytorch_ext.flash_attn(q8, k8, v8)


def test_empty_sequences():
    """No key: out 0 and lse +inf; no query: empty results (quantize_fp8 scales nothing)."""
    out, lse = flash_attn_fp8(*quantize_fp8(*inputs(nk=0)), return_softmax_lse=True)
    assert out.shape == (2, 37, 4, 64) and bool((out == 0).all()) and bool((lse == float("inf")).all())
    out, lse = flash_attn_fp8(*quantize_fp8(*inputs(nq=0)), return_softmax_lse=True)
    assert out.shape == (2, 0, 4, 64) and lse.shape == (2, 4, 0)
