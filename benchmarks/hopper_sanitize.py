"""Small calls of every Hopper attention kernel, for compute-sanitizer (H100/H200 only):

    compute-sanitizer --tool memcheck python benchmarks/hopper_sanitize.py
    compute-sanitizer --tool racecheck --racecheck-report analysis python benchmarks/hopper_sanitize.py
    python benchmarks/hopper_sanitize.py bf16|fp8    # one family only

The bf16 forward and backward (dK/dV and dQ kernels) and the float8 forward, head dims 64 and
128, GQA, causal, odd lengths, and a 9000-token causal call so that head dim 64 takes the Hopper
forward. Run it once without the sanitizer first: the kernels then compile outside it.
"""
import os
import sys

import torch

if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    sys.exit(print(f"{os.path.basename(__file__)}: needs a Hopper (sm90) GPU; none here"))
sys.path.insert(0, os.getcwd())
import mytorch_ext, mytorch_ext.triton.flash_attn as fa
from mytorch_ext.ops.attention_fp8 import flash_attn_fp8, quantize_fp8
torch.manual_seed(0)
which = sys.argv[1] if len(sys.argv) > 1 else "all"
for D in (64, 128):
    for (B, Nq, Nk, H, HK, causal) in ((1, 300, 300, 2, 1, False), (1, 200, 333, 2, 2, True), (1, 9000, 9000, 1, 1, True)):
        if D == 128 and Nq == 9000: continue
        q = torch.randn(B, Nq, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(B, Nk, HK, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(B, Nk, HK, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        if which in ("all", "bf16"):
            o = mytorch_ext.flash_attn(q, k, v, causal=causal); o.sum().backward()
        if which in ("all", "fp8"):
            flash_attn_fp8(*quantize_fp8(q.detach(), k.detach(), v.detach()), causal=causal)
        torch.cuda.synchronize()
assert fa._HOPPER_DISABLED is None and fa._HOPPER_FP8_DISABLED is None, "the Hopper kernels did not run"
print("every Hopper kernel ran")
