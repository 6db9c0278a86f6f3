"""The causal Hopper forward's two schedules, timed in one run (H100/H200 only):
"snake" (persistent programs taking tiles in snake order) and "per_tile" (a program per tile),
both launched through flash_attn_hopper.forward / forward_fp8 with SNAKE_MAX_SEQLEN set for the
call; bf16 rows also time torch.ops.mytorch.flash_attn ("op", what its C++ launcher replays:
the configuration its first call recorded, which in round 0 follows the per_tile launch, so
at head dim 128 it times a program per tile), cuDNN and FlashAttention-2 through SDPA.
bf16 and float8, causal, B*N = 16k tokens, H*D = 2048, median of 3 rounds (min-max).

    python benchmarks/hopper_causal_schedule.py
"""
import os, sys, statistics
sys.path.insert(0, os.getcwd())
import torch, torch.nn.functional as F, triton
from torch.nn.attention import SDPBackend, sdpa_kernel
import mytorch_ext
import mytorch_ext.triton.flash_attn_hopper as fh
from mytorch_ext.ops.attention_fp8 import quantize_fp8
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)

def launch(q, k, v, max_seq, fp8=None):
    fh.SNAKE_MAX_SEQLEN = max_seq
    B, n, H, D = q.shape
    out = torch.empty(q.shape, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(B, H, n, dtype=torch.float32, device="cuda")
    kw = dict(softmax_scale=D ** -0.5, softcap=0.0, group=1, left=False, right=True, wl=0, wr=0)
    if fp8 is None:
        fh.forward(q, k, v, out, lse, **kw)
    else:
        fh.forward_fp8(q, k, v, fp8, out, lse, **kw)

for kind in ("bf16", "fp8"):
    for D in (64, 128):
        for N in (1024, 2048, 4096, 8192, 16384):
            B, H = 16384 // N, 2048 // D
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(B, N, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
            flops = 4 * B * H * N * N * D / 2
            fns = {}
            if kind == "fp8":
                q8, k8, v8, qd, kd, vd = quantize_fp8(q, k, v)
                ds = torch.stack([d.expand(B, H) for d in (qd, kd, vd)]).contiguous()
                fns["snake"] = lambda: launch(q8, k8, v8, 1 << 30, ds)
                fns["per_tile"] = lambda: launch(q8, k8, v8, 0, ds)
            else:
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                fns["snake"] = lambda: launch(q, k, v, 1 << 30)
                fns["per_tile"] = lambda: launch(q, k, v, 0)
                fns["op"] = lambda: torch.ops.mytorch.flash_attn(q, k, v, causal=True)
                def cud():
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
                def fa2():
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
                fns["cudnn"], fns["fa2"] = cud, fa2
            fh.SNAKE_MAX_SEQLEN = 4096
            res = {n: [] for n in fns}
            for rnd in range(3):
                for n, f in fns.items():
                    res[n].append(flops / triton.testing.do_bench(f, warmup=25, rep=100) / 1e9)
            fh.SNAKE_MAX_SEQLEN = 4096
            med = {n: statistics.median(x) for n, x in res.items()}
            cells = " ".join(f"{n} {med[n]:.0f} ({min(res[n]):.0f}-{max(res[n]):.0f})" for n in res)
            extra = f"snake/per_tile {med['snake'] / med['per_tile']:.3f}"
            if "cudnn" in med:
                extra += f" op/cudnn {med['op'] / med['cudnn']:.3f} op/fa2 {med['op'] / med['fa2']:.3f}"
            print(f"tflops {kind} D{D} N{N} causal: {cells}; {extra}", flush=True)
