"""Out-of-range indices and bad varlen offsets on CUDA stop the kernel with a device-side
assert, as ATen's do: the op reads nothing back on the host (no synchronisation, so it may
run inside a CUDA graph; the sync debug mode would raise), the kernel prints the op, the
value and what was expected, and CUDA reports the assert asynchronously: at a later launch
of the same call, or at the next synchronisation. Each case runs in a process of its own:
the CUDA context is unusable after a device-side assert."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

VARLEN = "q = torch.randn(10, 2, 16, dtype=torch.float16, device='cuda')\n"

# case: (set-up, the call, what the kernel prints)
CASES = {
    "fused_cross_entropy": (
        "x = torch.randn(4, 10, device='cuda'); t = torch.tensor([1, 2, 13, 3]).cuda()",
        "out = torch.ops.mytorch.fused_cross_entropy(x, t)",
        "mytorch::fused_cross_entropy: target 13 is out of bounds (expected a value in [0, 10) or ignore_index=-100)"),
    "cross_entropy via patch()": (
        "import torch.nn.functional as F\nmytorch_ext.patch(['cross_entropy'])\n"
        "x = torch.randn(4, 10, device='cuda', requires_grad=True); t = torch.tensor([1, -5, 2, 3]).cuda()",
        "out = F.cross_entropy(x, t); out.backward()",
        "target -5 is out of bounds (expected a value in [0, 10) or ignore_index=-100)"),
    "nll_loss": (
        "x = torch.randn(4, 10, device='cuda').log_softmax(1); t = torch.tensor([1, 2, 3, 10]).cuda()",
        "out = torch.ops.mytorch.nll_loss(x, t)",
        "mytorch::nll_loss: target 10 is out of bounds (expected a value in [0, 10) or ignore_index=-100)"),
    "embedding": (
        "w = torch.randn(8, 4, device='cuda'); i = torch.tensor([0, 8]).cuda()",
        "out = torch.ops.mytorch.embedding(w, i)",
        "mytorch::embedding: index 8 is out of bounds (expected a value in [0, 8))"),
    "max_pool2d_backward": (
        "x = torch.randn(1, 1, 4, 4, device='cuda'); g = torch.ones(1, 1, 2, 2, device='cuda')\n"
        "i = torch.tensor([[[[0, 2], [8, 16]]]]).cuda()",
        "out = torch.ops.mytorch.max_pool2d_backward(g, x, i)",
        "mytorch::max_pool2d_backward: index 16 is out of bounds (expected a value in [0, 16))"),
    # varlen attention: the offsets are read by a check kernel on the stream
    "flash_attn cu_seqlens decreasing": (
        VARLEN + "cu = torch.tensor([0, 6, 4, 10], dtype=torch.int32).cuda()",
        "out = mytorch_ext.flash_attn_varlen(q, q, q, cu, cu, 10, 10)",
        "mytorch::flash_attn: expected cu_seqlens_q to start at 0 and never decrease, got "
        "cu_seqlens_q[2] = 4 after 6"),
    "flash_attn cu_seqlens end": (
        VARLEN + "cu = torch.tensor([0, 4, 9], dtype=torch.int32).cuda()",
        "out = mytorch_ext.flash_attn_varlen(q, q, q, cu, cu, 10, 10)",
        "mytorch::flash_attn: expected cu_seqlens_k[-1] == k.shape[0], got 9 and 10"),
    "flash_attn max_seqlen": (
        VARLEN + "cu = torch.tensor([0, 6, 10], dtype=torch.int32).cuda()",
        "out = mytorch_ext.flash_attn_varlen(q, q, q, cu, cu, 5, 5)",
        "mytorch::flash_attn: expected max_seqlen_q >= the longest sequence, got 5 < 6 (sequence 0)"),
}

SCRIPT = """
import torch, mytorch_ext
{setup}
torch.cuda.synchronize()
torch.cuda.set_sync_debug_mode("error")  # the op itself must not synchronise
{call}
torch.cuda.set_sync_debug_mode(0)
torch.cuda.synchronize()
print("NO ASSERT", flush=True)
"""


@pytest.mark.parametrize("case", list(CASES))
def test_out_of_range_index_asserts_on_the_device(case):
    setup, call, message = CASES[case]
    script = textwrap.dedent(SCRIPT).format(setup=setup, call=call)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert "NO ASSERT" not in r.stdout, out
    assert r.returncode != 0
    assert "synchronizing CUDA operation" not in out, out  # no host read in the op
    assert message in out, out
    assert "device-side assert" in out, out
