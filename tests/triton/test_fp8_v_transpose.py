"""The V^T pass of the float8 Hopper forward (flash_attn_hopper.transpose_v), a Triton
kernel: every byte lands at its transposed place, for odd key counts, strided heads and
both head dims (under the interpreter without a GPU)."""
import pytest
import torch

from fa_ref import DEVICE

fh = pytest.importorskip("mytorch_ext.triton.flash_attn_hopper",
                         reason="needs a Triton with Gluon")


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [1, 127, 300])
def test_transpose_v_moves_every_byte(d, n):
    v = torch.randn(2, n, 4, d, device=DEVICE).to(torch.float8_e4m3fn)[:, :, 1:3]  # strided heads
    vt = fh.transpose_v(v)
    assert vt.shape == (2, 2, d, n) and vt.stride(-1) == 1 and vt.stride(-2) % 16 == 0
    assert torch.equal(vt.view(torch.uint8), v.permute(0, 2, 3, 1).view(torch.uint8))
