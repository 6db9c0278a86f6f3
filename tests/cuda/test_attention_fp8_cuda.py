"""mytorch::flash_attn_fp8 on CUDA.

On an sm90 GPU the Gluon float8 kernel (flash_attn_hopper.forward_fp8) must serve the call,
and its out / lse are checked against a float64 reference of the dequantized inputs: head
dims 64 and 128, GQA/MQA, odd lengths, fewer keys than queries (rows with no key), causal,
windows, softcap, per-head and per-tensor descales, strided inputs. Elsewhere (another GPU,
or the kernel switched off) the op dequantizes and runs flash_attn, checked the same way.
The CPU semantics and bad input are tests/ops/test_attention_fp8.py.
"""
import pytest
import torch

from helpers import attention_reference

GPU = torch.cuda.is_available()
SM90 = GPU and torch.cuda.get_device_capability()[0] == 9
pytestmark = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")

if GPU:
    import mytorch_ext  # noqa: F401
    from mytorch_ext.ops.attention_fp8 import _dequantize, flash_attn_fp8, quantize_fp8
    from mytorch_ext.triton import flash_attn as fa
    from mytorch_ext.triton import flash_attn_hopper as fh



def error_bound(o_ref, p_abs_v):
    """What the kernel may err by against float64 of its own float8 inputs, per element: P is
    rounded to float8 (relative error <= 2^-4) before P V, so |error| <= 2^-4 sum_j P_j |v_j|;
    plus the bfloat16 output's rounding (2^-8 relative) and 2e-3 for float8 subnormals and
    float32 accumulation."""
    return p_abs_v * 2 ** -4 + o_ref.abs() * 2 ** -8 + 2e-3


RMS_ERR = 0.01  # Gaussian inputs: the rounding errors of P average out


def _check(d, shape, causal, wl, wr, softcap, per_head, *, strided=False, expect_hopper):
    b, nq, nk, h, hk = shape
    torch.manual_seed(0)
    q = torch.randn(b, nq, h, d, device="cuda")
    k = torch.randn(b, nk, hk, d, device="cuda")
    v = torch.randn(b, nk, hk, d, device="cuda")
    q8, k8, v8, qd, kd, vd = quantize_fp8(q, k, v, per_head=per_head)
    if strided:  # (B, H, N, D) storage seen as (B, N, H, D)
        q8, k8, v8 = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q8, k8, v8))
    calls = []
    real = fh.forward_fp8

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    fh.forward_fp8 = spy
    try:
        out, lse = flash_attn_fp8(q8, k8, v8, qd, kd, vd, causal=causal, window_size=(wl, wr),
                                  softcap=softcap, return_softmax_lse=True)
    finally:
        fh.forward_fp8 = real
    assert bool(calls) == expect_hopper, (calls, fa._HOPPER_FP8_DISABLED)
    deq = [_dequantize(t, s.expand(b, hk), torch.float64) for t, s in ((q8, qd), (k8, kd), (v8, vd))]
    o_ref, lse_ref, p_abs_v = attention_reference(*deq, d ** -0.5, causal, wl, wr, softcap)
    assert out.dtype == torch.bfloat16 and out.shape == (b, nq, h, d)
    fin = torch.isfinite(lse_ref)
    diff = out.double() - o_ref
    assert bool((diff.abs() <= error_bound(o_ref, p_abs_v)).all())
    assert diff.pow(2).mean().sqrt() <= RMS_ERR
    # float8 wgmma accumulates the scores with fewer than float32's bits
    torch.testing.assert_close(lse.double()[fin], lse_ref[fin], atol=5e-3, rtol=1e-4)
    assert bool((lse[~fin] == float("inf")).all()) and bool((out.transpose(1, 2)[~fin] == 0).all())


# the last: past SHORT_SEQLEN, head dim 64's 192-row tiles, whose last tile leaves one
# warpgroup without a query row
SHAPES = [(2, 1000, 1000, 4, 2), (1, 384, 1024, 8, 1), (1, 1024, 384, 2, 2), (3, 77, 200, 2, 1),
          (1, 1030, 1500, 4, 2)]
MASKS = [(False, -1, -1, 0.0), (True, -1, -1, 0.0), (False, 100, 37, 0.0), (True, -1, -1, 30.0)]


@pytest.mark.skipif(not SM90, reason="the float8 kernel needs a Hopper (sm90) GPU")
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mask", MASKS)
def test_hopper_kernel_against_float64(d, shape, mask):
    _check(d, shape, *mask, per_head=True, expect_hopper=True)


@pytest.mark.skipif(not SM90, reason="the float8 kernel needs a Hopper (sm90) GPU")
@pytest.mark.parametrize("d", [64, 128])
def test_hopper_kernel_per_tensor_descales_and_strided_inputs(d):
    _check(d, SHAPES[0], True, -1, -1, 0.0, per_head=False, strided=True, expect_hopper=True)


@pytest.mark.parametrize("d", [64, 128])
def test_dequantizing_path(d):
    """The path of GPUs without the kernel, forced here by switching the kernel off."""
    saved = fa._HOPPER_FP8_DISABLED
    fa._HOPPER_FP8_DISABLED = "off for the test"
    try:
        _check(d, SHAPES[1], True, -1, -1, 0.0, per_head=True, expect_hopper=False)
    finally:
        fa._HOPPER_FP8_DISABLED = saved


@pytest.mark.skipif(SM90, reason="checks a GPU other than sm90")
def test_other_gpus_never_reach_the_hopper_kernel():
    _check(64, SHAPES[0], False, -1, -1, 0.0, per_head=True, expect_hopper=False)
