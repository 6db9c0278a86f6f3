"""mytorch::rope (rotary position embedding): ATen parity (Llama's rotate_half, GPT-J's pairs) on
every device present, in place and out of place, backward, gradcheck, opcheck, error text."""
import pytest
import torch
from expecttest import TestCase

from helpers import assert_close, check_fwd_bwd, devices, dtypes_for, first_line, ref_dtype
from mytorch_ext.ops.rope import rope

ops = torch.ops.mytorch
DEVICES = devices()


def rope_ref(x, cos, sin, interleaved):
    """Reference: Llama's rotate_half, or GPT-J's pairs, on the first rotary_dim features."""
    rd = 2 * cos.shape[-1]
    c = cos[:, None, :].to(x.dtype)
    s = sin[:, None, :].to(x.dtype)
    xr, xp = x[..., :rd], x[..., rd:]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
        out = torch.stack([o1, o2], dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2:]
        out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return torch.cat([out, xp], dim=-1)


def rope_tables(seq, half, device, dtype=torch.float32):
    inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float64) / half))
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None]
    return ang.cos().to(device=device, dtype=dtype), ang.sin().to(device=device, dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape,half", [((2, 5, 3, 16), 8), ((7, 2, 10), 3), ((1, 4, 2, 64), 16)])
def test_rope(device, interleaved, shape, half):
    for dtype in dtypes_for(device):
        x = torch.randn(shape, dtype=dtype, device=device)
        cos, sin = rope_tables(shape[-3], half, device)
        check_fwd_bwd(lambda x: rope(x, cos, sin, interleaved), lambda x: rope_ref(x, cos, sin, interleaved),
                      [x], dtype)
        y = x.clone()
        out = rope(y, cos, sin, interleaved, inplace=True)
        assert out.data_ptr() == y.data_ptr()
        assert_close(y, rope_ref(x.to(ref_dtype(dtype)), cos, sin, interleaved).to(dtype), dtype)


def test_rope_gradcheck_and_table_dtype():
    x = torch.randn(2, 3, 2, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_tables(3, 4, "cpu", torch.float64)
    assert torch.autograd.gradcheck(lambda x: rope(x, cos, sin), (x,))
    assert torch.autograd.gradcheck(lambda x: rope(x, cos, sin, True), (x,))
    xb = torch.randn(2, 3, 2, 8, dtype=torch.bfloat16)
    cb, sb = rope_tables(3, 4, "cpu", torch.bfloat16)
    assert_close(rope(xb, cb, sb), rope_ref(xb.float(), cb.float(), sb.float(), False).bfloat16())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_table_dtypes_and_strides(device, interleaved):
    """Tables in float32, bfloat16 or float16, as a slice of a wider table (rows D apart, as
    apply_rotary_pos_emb's cos[0, :, :half]), or of mixed dtypes: the same bits as float32
    contiguous copies of the same values, forward, backward and in place."""
    x = torch.randn(2, 6, 3, 16, dtype=torch.bfloat16, device=device)
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        wide_c, wide_s = (t.repeat(1, 2) for t in rope_tables(6, 8, device, dt))  # (S, 16)
        for cos, sin in ((wide_c[:, :8].contiguous(), wide_s[:, :8].contiguous()),
                         (wide_c[:, :8], wide_s[:, :8]),
                         (wide_c[:, :8], wide_s[:, :8].float())):
            cf, sf = cos.float().contiguous(), sin.float().contiguous()
            want = rope(x, cf, sf, interleaved)
            assert torch.equal(rope(x, cos, sin, interleaved), want), (dt, cos.stride(), sin.dtype)
            assert torch.equal(ops.rope_backward(x, cos, sin, interleaved),
                               ops.rope_backward(x, cf, sf, interleaved))
            y = x.clone()
            ops.rope_(y, cos, sin, interleaved)
            assert torch.equal(y, want)
            assert_close(want, rope_ref(x.float(), cf, sf, interleaved).bfloat16())


@pytest.mark.parametrize("device", DEVICES)
def test_rope_opcheck(device):
    oc = torch.library.opcheck
    xr = torch.randn(2, 3, 2, 8, device=device, requires_grad=True)
    cos, sin = rope_tables(3, 4, device)
    oc(ops.rope.default, (xr, cos, sin, False))
    oc(ops.rope_backward.default, (torch.randn(2, 3, 2, 8, device=device), cos, sin, True))
    oc(ops.rope_.default, (torch.randn(2, 3, 2, 8, device=device), cos, sin, False))


class TestRopeBadInput(TestCase):
    def test_rope(self):
        cos, sin = rope_tables(3, 5, "cpu")
        self.assertExpectedInline(first_line(lambda: rope(torch.randn(1, 3, 2, 8), cos, sin)), """mytorch::rope: expected cos and sin of shape (seq, rotary_dim / 2) with seq = 3 and rotary_dim <= 8, got [3, 5]""")
