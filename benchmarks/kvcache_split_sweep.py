"""Split-KV decode sweep: the kvcache split kernel over BLOCK_N x num_warps x num_stages x splits,
against cuDNN and FA2 SDPA and a read of the same caches, at decode shapes (GQA 32:8, d128, bf16).

    python -m benchmarks.kvcache_split_sweep [--per-layer | --per-layer-grid]    (a CUDA GPU)

Each time: median (p10..p90) of 20-30 calls, with 512 MiB written before each call to flush L2.
"""
import itertools
import torch, triton
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from mytorch_ext.triton import kvcache as kv
dev = "cuda"
_flush = []
def cuda_us(fn, n=30):
    if not _flush:
        _flush.append(torch.empty(512 * 2**20, dtype=torch.int8, device=dev))
    flush = _flush[0]
    ts = []
    for _ in range(5): fn()
    for _ in range(n):
        flush.zero_()
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b) * 1e3)
    ts.sort(); return ts[len(ts)//2], ts[len(ts)//10], ts[-len(ts)//10-1]

def variant(q, kc, vc, kn, vn, sl, block_n, warps, stages, splits, append=True):
    batch, seqlen_q, hq, d = q.shape; hk = kc.shape[2]; group = hq // hk; capacity = kc.shape[1]
    dummy = sl
    if append:
        kv._append_kernel[(batch, hk)](kn, vn, kc, vc, sl, dummy, dummy, dummy, dummy, dummy,
            kn.stride(0), kn.stride(1), kn.stride(2), vn.stride(0), vn.stride(1), vn.stride(2),
            kc.stride(0), kc.stride(1), kc.stride(2), vc.stride(0), vc.stride(1), vc.stride(2), 0, 0, 0,
            1, capacity, batch, 1, HEAD_DIM=d, BLOCK_D=d, PAGED=False, HAS_LEFTPAD=False, HAS_BIDX=False,
            ROTARY=False, HALF=0, INTERLEAVED=True, num_warps=2)
    out = torch.empty_like(q); lse = torch.empty((batch, hq, seqlen_q), dtype=torch.float32, device=dev)
    rows = group * seqlen_q; block_m = max(16, min(64, triton.next_power_of_2(rows)))
    if splits > 1:
        op = torch.empty((batch * hk, splits, rows, d), dtype=torch.float32, device=dev)
        lp = torch.empty((batch * hk, splits, rows), dtype=torch.float32, device=dev)
    else:
        op = lp = lse
    kv._split_kernel[(1, batch * hk, splits)](q, kc, vc, out, lse, op, lp, sl, dummy, dummy, dummy, dummy, dummy, lse,
        q.stride(0), q.stride(1), q.stride(2), kc.stride(0), kc.stride(1), kc.stride(2),
        vc.stride(0), vc.stride(1), vc.stride(2), out.stride(0), out.stride(1), out.stride(2), 0, 0, 0, 0,
        seqlen_q, 1 if append else 0, hq, hk, capacity, batch, 1, d ** -0.5, 0.0, 0, 0,
        GROUP=group, HEAD_DIM=d, BLOCK_D=d, BLOCK_M=block_m, BLOCK_N=block_n, NUM_SPLITS=splits, PAGED=False,
        HAS_LEFTPAD=False, HAS_BIDX=False, ROTARY=False, HALF=0, INTERLEAVED=True, Q_PER_TOKEN=False,
        LEFT=False, RIGHT=False, SOFTCAP=False, ALIBI=False, num_warps=warps, num_stages=stages)
    if splits > 1:
        kv._combine_kernel[(batch * hk, rows)](op, lp, out, lse, out.stride(0), out.stride(1), out.stride(2),
            seqlen_q, hq, hk, GROUP=group, HEAD_DIM=d, BLOCK_D=d, NUM_SPLITS=splits,
            BLOCK_S=max(2, triton.next_power_of_2(splits)), num_warps=2)
    return out

def sdpa(q, kc, vc, be):
    with sdpa_kernel([be]):
        return F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True).transpose(1, 2)

def main():
    res = {}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, "SMs", sms)
    for (B, N) in [(1, 32768), (1, 8192), (8, 4096), (64, 4096)]:
        hq, hk, d = 32, 8, 128
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn(B, 1, hq, d, device=dev, dtype=torch.bfloat16)
        kc = torch.randn(B, N, hk, d, device=dev, dtype=torch.bfloat16); vc = torch.randn_like(kc)
        kn, vn = kc[:, N-1:].clone(), vc[:, N-1:].clone()
        sl = torch.full((B,), N - 1, dtype=torch.int32, device=dev)
        ref = sdpa(q.float(), kc.float(), vc.float(), SDPBackend.MATH)
        gb = kc.numel() * 2 * 2 / 1e9
        line = {}
        for name, be in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
            try: line[name] = cuda_us(lambda: sdpa(q, kc, vc, be))
            except RuntimeError as e: line[name] = None
        line["read_roofline(sum k+v)"] = cuda_us(lambda: (kc.sum(dtype=torch.float32), vc.sum(dtype=torch.float32)))
        progs = B * hk
        heur = kv.pick_num_splits(progs, triton.cdiv(N, 64), 2 * sms)
        print(f"\n== B={B} N={N} GQA 32:8 d128 bf16: {gb*1e3:.0f} MB of K+V; heuristic splits {heur}")
        for k_, v_ in line.items():
            if v_: print(f"  {k_:28s} {v_[0]:8.1f} us  ({v_[1]:.1f}..{v_[2]:.1f})  {gb/v_[0]*1e6/1e3:.2f} TB/s")
        cands = sorted({1, heur, max(1, sms // progs), max(1, 2 * sms // progs), max(1, 3 * sms // progs), max(1, 4 * sms // progs)})
        cands = [s for s in cands if s <= 256]
        best = None
        for bn, w, st, sp in itertools.product([64, 128], [4, 8], [2, 3, 4], cands):
            if bn == 128 and st == 4: continue
            try:
                o = variant(q, kc, vc, kn, vn, sl, bn, w, st, sp)
                err = (o.float() - ref).abs().max().item()
                t = cuda_us(lambda: variant(q, kc, vc, kn, vn, sl, bn, w, st, sp), n=20)
            except Exception as e:
                print(f"  bn={bn} w={w} st={st} sp={sp}: FAIL {type(e).__name__} {str(e)[:80]}"); continue
            tag = ""
            if best is None or t[0] < best[0][0]: best = (t, (bn, w, st, sp)); tag = " *"
            print(f"  bn={bn:3d} w={w} st={st} sp={sp:3d}: {t[0]:7.1f} us ({t[1]:.1f}..{t[2]:.1f}) {gb/t[0]*1e6/1e3:.2f} TB/s err {err:.1e}{tag}")
        t_ns = cuda_us(lambda: variant(q, kc, vc, kn, vn, sl, *best[1], append=False), n=20)
        print(f"  best {best[1]}: {best[0][0]:.1f} us; without append {t_ns[0]:.1f} us; x cudnn {line['cudnn'][0]/best[0][0]:.2f}" if line.get('cudnn') else f"  best {best[1]} {best[0][0]:.1f}")



def per_layer(B=1, N=32768, layers=8, configs=((64, 4, 2, 29), (64, 4, 4, 33), (128, 8, 3, 16))):
    """A decode step as a model runs it: one call per layer, each layer with its own cache (all
    of them far larger than L2), back to back in a CUDA graph, without a flush; microseconds
    per layer."""
    hq, hk, d = 32, 8, 128
    q = torch.randn(B, 1, hq, d, device=dev, dtype=torch.bfloat16)
    caches = [(torch.randn(B, N, hk, d, device=dev, dtype=torch.bfloat16),
               torch.randn(B, N, hk, d, device=dev, dtype=torch.bfloat16)) for _ in range(layers)]
    kn, vn = caches[0][0][:, :1].clone(), caches[0][1][:, :1].clone()
    sl = torch.full((B,), N - 1, dtype=torch.int32, device=dev)

    def loop_us(call):
        """The layers' calls captured in one CUDA graph (no host time between them), replayed."""
        for kc, vc in caches:
            call(kc, vc)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for kc, vc in caches:
                call(kc, vc)
        graph.replay()
        ts = []
        for _ in range(15):
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b) * 1e3 / layers)
        ts.sort(); return ts[len(ts) // 2], ts[1], ts[-2]

    gb = caches[0][0].numel() * 2 * 2 / 1e9
    print(f"\n== per layer, {layers} layers back to back, B={B} N={N} GQA 32:8 d128 bf16 ({gb*1e3:.0f} MB of K+V a layer)")
    rows = [("cudnn", lambda kc, vc: sdpa(q, kc, vc, SDPBackend.CUDNN_ATTENTION)),
            ("flash", lambda kc, vc: sdpa(q, kc, vc, SDPBackend.FLASH_ATTENTION))]
    rows += [(f"mytorch bn={c[0]} w={c[1]} st={c[2]} sp={c[3]}", lambda kc, vc, c=c: variant(q, kc, vc, kn, vn, sl, *c))
             for c in configs]
    import mytorch_ext
    rows.append(("mytorch op (its heuristic)",
                 lambda kc, vc: mytorch_ext.flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=sl)))
    for name, call in rows:
        t = loop_us(call)
        print(f"  {name:34s} {t[0]:7.1f} us ({t[1]:.1f}..{t[2]:.1f})  {gb / t[0] * 1e3:.2f} TB/s")


def per_layer_grid():
    """per_layer over BLOCK_N x num_warps x num_stages x three split counts (the heuristic with
    two programs per SM, with one, and four per SM), at three decode shapes."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for B, N in ((1, 32768), (1, 8192), (8, 4096)):
        progs = B * 8
        sps = sorted({kv.pick_num_splits(progs, N // 64, 2 * sms), kv.pick_num_splits(progs, N // 64, sms),
                      max(1, 4 * sms // progs)})
        cfgs = [(bn, w, st, sp) for bn, w, st, sp in itertools.product((64, 128), (4, 8), (2, 3, 4), sps)
                if not (bn == 128 and st == 4)]
        per_layer(B, N, 8, configs=cfgs)


if __name__ == "__main__":
    import sys
    if "--per-layer-grid" in sys.argv:
        per_layer_grid()
    elif "--per-layer" in sys.argv:
        per_layer()
        per_layer(64, 4096, 4, configs=((64, 4, 2, 1), (64, 8, 3, 1)))
    else:
        main()
