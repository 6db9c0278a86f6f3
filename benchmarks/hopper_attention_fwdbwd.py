"""The Hopper (Gluon) attention backward: dq, dk, dv checked against float64, then forward+
backward timed beside the Triton kernels, cuDNN and FlashAttention-2 in one run (H100/H200).

    python benchmarks/hopper_attention_fwdbwd.py              # 30 checks, then the timings
    SKIPCHECK=1 python benchmarks/hopper_attention_fwdbwd.py  # timings only
    BSWEEP="64,64,128,3,1;..." ...   # also time other dK/dV block configs
                                     # (head_dim,BLOCK_M,BLOCK_N,STAGES,PINGPONG), each
                                     # checked against the default's gradients first
    REGS=232,248 ...                 # also time these consumer register counts
    DIMS=128 ...                     # only these head dims in the timings

Run from the checkout root. Gradients must stay within twice the Triton kernels' error on
the same inputs. TFLOP/s: 3.5 x the forward's count. "hopper" is what flash_attn dispatches
to with the Hopper kernels on, "triton" forces the Triton kernels. Each time is the median
GPU time of CUDA-graph replays (benchmarks/gpu_timing.py; HOST_TIMING=1 counts the host's
launch cost too).
"""
import os, sys, types, json
sys.path.insert(0, os.getcwd())
for name in ("mytorch_ext", "mytorch_ext.triton"):
    m = types.ModuleType(name); m.__path__ = [os.path.join(os.getcwd(), *name.split("."))]; sys.modules[name] = m
import torch, triton
from benchmarks.gpu_timing import gpu_seconds
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
import mytorch_ext.triton.flash_attn as fa
import mytorch_ext.triton.flash_attn_hopper_bwd as fb
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    sys.exit(print(f"{os.path.basename(__file__)}: needs a Hopper (sm90) GPU; none here"))
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
OUT = os.environ.get("OUT", ".")

def ref_fn(q, k, v, scale, causal, wl, wr):
    B, Nq, H, D = q.shape; Nk = k.shape[1]; g = H // k.shape[2]
    qd, kd, vd = (t.transpose(1, 2) for t in (q, k, v))
    kd = kd.repeat_interleave(g, 1); vd = vd.repeat_interleave(g, 1)
    s = qd @ kd.transpose(-1, -2) * scale
    i = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq); j = torch.arange(Nk, device=q.device)[None, :]
    ok = torch.ones(Nq, Nk, dtype=torch.bool, device=q.device)
    if causal: wr = 0
    if wr >= 0: ok &= j <= i + wr
    if wl >= 0: ok &= j >= i - wl
    s = s.masked_fill(~ok, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return (p @ vd).transpose(1, 2)

def ours(q, k, v, g, causal, wl, wr, hopper):
    fa._HOPPER_DISABLED = None if hopper else "off"
    scale = q.shape[-1] ** -0.5
    out, lse = fa.flash_attn_forward(q, k, v, softmax_scale=scale, causal=causal, window_left=wl, window_right=wr)
    return fa.flash_attn_backward(g, q, k, v, out, lse, softmax_scale=scale, causal=causal, window_left=wl, window_right=wr)

calls = []
real = fb.backward_kv
def spy(*a, **k):
    calls.append(1); return real(*a, **k)
fb.backward_kv = spy

fails = 0; n = 0
torch.manual_seed(0)
for D in (() if os.environ.get('SKIPCHECK') else (64, 128)):
    for (B, Nq, Nk, H, HK) in ((2, 1024, 1024, 4, 4), (2, 1000, 1000, 4, 2), (1, 384, 1024, 8, 1), (1, 1024, 384, 2, 2), (3, 77, 200, 2, 1)):
        for (causal, wl, wr) in ((False, -1, -1), (True, -1, -1), (False, 100, 37)):
            dt = torch.bfloat16 if (n % 2 == 0) else torch.float16; n += 1
            q = torch.randn(B, Nq, H, D, device="cuda", dtype=dt); k = torch.randn(B, Nk, HK, D, device="cuda", dtype=dt); v = torch.randn(B, Nk, HK, D, device="cuda", dtype=dt)
            g = torch.randn(B, Nq, H, D, device="cuda", dtype=dt)
            qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
            ref_fn(qd, kd, vd, D ** -0.5, causal, wl, wr).backward(g.double())
            calls.clear()
            try:
                got = ours(q, k, v, g, causal, wl, wr, True); torch.cuda.synchronize()
            except Exception as e:
                print("ERROR", D, B, Nq, Nk, H, HK, causal, wl, wr, repr(e)[:300], flush=True); fails += 1; continue
            used = bool(calls) and fa._HOPPER_DISABLED is None
            tri = ours(q, k, v, g, causal, wl, wr, False)
            errs = []
            ok = used
            for name, x, t, r in zip("qkv", got, tri, (qd.grad, kd.grad, vd.grad)):
                e = (x.double() - r).abs().max().item(); et = (t.double() - r).abs().max().item()
                errs.append(f"d{name} {e:.2e} (triton {et:.2e})")
                ok = ok and e <= max(2 * et, 2e-3) and bool(torch.isfinite(x).all())
            if not ok: fails += 1
            print("ok  " if ok else "FAIL", f"D{D} {str(dt)[6:]} B{B} q{Nq} k{Nk} H{H}/{HK} causal={causal} win=({wl},{wr}) hopper={used}: " + ", ".join(errs), flush=True)
print("BWD CHECK", "FAILED" if fails else "PASSED", fails, flush=True)
if fails and "--bench-anyway" not in sys.argv:
    sys.exit(1)

def bench(fn):
    return gpu_seconds(fn, 40)
# None: the launcher's own rule (fb._kv_blocks: by head dim and mask); a tuple forces one
SWEEP = {64: [None], 128: [None]}
REGS0, KV_BLOCKS0 = fb.CONSUMER_REGS, fb._kv_blocks
for item in os.environ.get("BSWEEP", "").split(";"):
    if item:
        d, bm, bn, st, pp = map(int, item.split(","))
        SWEEP[d].append((bm, bn, st, bool(pp)))
# REGS=232,248: also time these consumer register counts (setmaxnreg) with the two-warpgroup
# blocks
for regs in os.environ.get("REGS", "").split(","):
    if regs:
        for d in SWEEP:
            SWEEP[d].append(fb._BLOCKS[d] + (int(regs),))
rows = []
for D in [int(d) for d in os.environ.get("DIMS", "64,128").split(",")]:
    for N in (1024, 4096, 16384):
        for causal in (False, True):
            B = 16384 // N; H = 2048 // D
            q, k, v, g = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            flops = 3.5 * 4 * B * H * N * N * D / (2 if causal else 1)
            r = {"D": D, "N": N, "causal": causal}
            best = None
            want = None
            for blocks in SWEEP[D]:
                fb._kv_blocks = KV_BLOCKS0 if blocks is None else (lambda *_, b=blocks[:4]: b)
                fb.CONSUMER_REGS = blocks[4] if blocks is not None and len(blocks) > 4 else REGS0
                # a swept config is checked against the default's gradients on these inputs
                # (the same sums in another order) before it is timed
                try:
                    got = ours(q, k, v, g, causal, -1, -1, True)
                except Exception as e:  # a config that does not compile or fit
                    print(f"   D{D} N{N} causal={causal} blocks {blocks}: FAIL, {repr(e)[:200]}", flush=True)
                    continue
                if want is None:
                    want = got
                else:
                    err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                              for a, b in zip(got, want))
                    if not err <= 2e-2:
                        print(f"   D{D} N{N} causal={causal} blocks {blocks}: FAIL, gradients differ from the "
                              f"default's by {err:.2e} (relative max)", flush=True)
                        continue
                t = flops / bench(lambda: ours(q, k, v, g, causal, -1, -1, True)) / 1e12
                if len(SWEEP[D]) > 1: print(f"   D{D} N{N} causal={causal} blocks {blocks}: {t:.1f}", flush=True)
                if best is None or t > best[0]: best = (t, blocks)
            fb._kv_blocks = KV_BLOCKS0
            fb.CONSUMER_REGS = REGS0
            r["hopper"] = best[0]; r["blocks"] = best[1]
            r["triton"] = flops / bench(lambda: ours(q, k, v, g, causal, -1, -1, False)) / 1e12
            qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v)); gt = g.transpose(1, 2)
            for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
                try:
                    with sdpa_kernel(be):
                        r[name] = flops / bench(lambda: torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), gt)) / 1e12
                except Exception as e:
                    r[name] = float("nan")
            rows.append(r)
            print(f"fwd+bwd D{D} N{N:6d} causal={causal!s:5}: hopper {r['hopper']:6.1f}  triton {r['triton']:6.1f}  cudnn {r['cudnn']:6.1f}  fa2 {r['fa2']:6.1f} TFLOP/s | hopper/cudnn {r['hopper']/r['cudnn']:.2f}x  hopper/triton {r['hopper']/r['triton']:.2f}x", flush=True)
json.dump(rows, open(os.path.join(OUT, "hopper_fwdbwd.json"), "w"))
