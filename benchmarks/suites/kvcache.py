"""kvcache: one decoding attention step, mytorch's flash_attn_with_kvcache (append the new
token into the cache, then attend; split-KV picked by the heuristic) against SDPA on the same
cache already holding the token: on CUDA each SDPA backend that accepts the call (flash,
efficient, cuDNN; GQA through enable_gqa) and the best of them, on the CPU ATen's SDPA (its
flash kernel, the faster of enable_gqa and a cache with the kv heads repeated). Shapes: batch 1 with a long GQA cache, batch 64 with a 4k cache, and between.
Every row is checked against SDPA's math backend in float32 before it is timed."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common import Table, check_close, device_skip_reason
from ..timing import time_ms


def skip_reason(device: str) -> str | None:
    return device_skip_reason(device, native=device != "cuda", triton=True)  # CUDA: Triton kernels only


# (batch, cache length, heads_q, heads_k, head_dim)
SHAPES = {
    "cuda": {"smoke": [(1, 1024, 8, 2, 128)],
             "quick": [(1, 32768, 32, 8, 128), (64, 4096, 32, 8, 128)],
             "full": [(1, 32768, 32, 8, 128), (1, 32768, 32, 32, 128), (8, 8192, 32, 8, 128),
                      (64, 4096, 32, 8, 128), (64, 4096, 32, 32, 128), (1, 1024, 32, 8, 128)]},
    "cpu": {"smoke": [(1, 256, 4, 1, 32)],
            "quick": [(1, 4096, 32, 8, 128), (8, 1024, 32, 8, 128)],
            "full": [(1, 32768, 32, 8, 128), (1, 8192, 32, 32, 128), (8, 4096, 32, 8, 128),
                     (64, 1024, 32, 8, 128)]},
}


def _label(b, n, hq, hk, d):
    kind = "MHA" if hq == hk else f"GQA {hq}:{hk}"
    return f"B={b} cache={n} {kind} D={d}"


def _inputs(b, n, hq, hk, d, dtype, device):
    g = torch.Generator().manual_seed(0)

    def rnd(*s):
        return torch.randn(*s, generator=g, dtype=torch.float32).to(dtype).to(device)

    q = rnd(b, 1, hq, d)
    k_cache, v_cache = rnd(b, n, hk, d), rnd(b, n, hk, d)
    k_new, v_new = k_cache[:, n - 1:].clone(), v_cache[:, n - 1:].clone()
    seqlens = torch.full((b,), n - 1, dtype=torch.int32, device=device)
    return q, k_cache, v_cache, k_new, v_new, seqlens


def _sdpa(q, k_cache, v_cache, backend=None):
    qs, ks, vs = q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    gqa = qs.shape[1] != ks.shape[1]
    if backend is None:
        return F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=gqa).transpose(1, 2)
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=gqa).transpose(1, 2)


def run(device: str, mode: str, progress) -> list[Table]:
    import mytorch_ext

    dev = "cuda" if device == "cuda" else "cpu"
    shapes = SHAPES[dev][mode]
    dtypes = [torch.bfloat16] if dev == "cuda" else [torch.float32, torch.bfloat16]
    if dev == "cuda":
        from torch.nn.attention import SDPBackend

        peers = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                 "cudnn": SDPBackend.CUDNN_ATTENTION}
        impls = ["mytorch", "sdpa_best"] + list(peers)
        where = torch.cuda.get_device_name()
    else:
        peers = {}
        impls = ["mytorch", "aten_sdpa"]
        where = "cpu" if device == "cpu" else "the mytorch device (SDPA on the CPU)"
    reps = {"smoke": dict(reps=1, min_time_s=0.0), "quick": dict(reps=3, min_time_s=0.05), "full": {}}[mode]
    bar = progress(len(shapes) * len(dtypes), f"kvcache ({device})")
    tables = []
    for dtype in dtypes:
        dt = str(dtype).replace("torch.", "")
        t = Table(f"decode attention step, {dt}, {where}", "us",
                  "median time of one step: append 1 token + attend (mytorch), attend the same cache (SDPA)",
                  impls, higher_is_better=False)
        for shape in shapes:
            q, kc, vc, kn, vn, sl = _inputs(*shape, dtype, dev)
            if device == "mytorch":
                mq, mkc, mvc, mkn, mvn, msl = (x.to("mytorch") for x in (q, kc, vc, kn, vn, sl))
            else:
                mq, mkc, mvc, mkn, mvn, msl = q, kc, vc, kn, vn, sl

            def ours():
                return mytorch_ext.flash_attn_with_kvcache(mq, mkc, mvc, mkn, mvn, cache_seqlens=msl)

            ref = _sdpa(q.float(), kc.float(), vc.float())
            check_close(f"kvcache {_label(*shape)} {dt}", ours().float().cpu(), ref.cpu(), 2e-2)
            row = {"mytorch": time_ms(ours, device, **reps) * 1e3}
            if dev == "cuda":
                for name, backend in peers.items():
                    try:
                        _sdpa(q, kc, vc, backend)
                    except RuntimeError:  # the backend does not take this call
                        row[name] = None
                        continue
                    row[name] = time_ms(lambda b=backend: _sdpa(q, kc, vc, b), device, **reps) * 1e3
                done = [row[p] for p in peers if row[p] is not None]
                row["sdpa_best"] = min(done) if done else None
            else:  # the faster of enable_gqa and a cache stored with the kv heads repeated
                g = shape[2] // shape[3]
                ke, ve = kc.repeat_interleave(g, 2), vc.repeat_interleave(g, 2)
                row["aten_sdpa"] = min(time_ms(lambda: _sdpa(q, kc, vc), "cpu", **reps),
                                       time_ms(lambda: _sdpa(q, ke, ve), "cpu", **reps)) * 1e3
            t.add(_label(*shape), row)
            bar.step(_label(*shape))
        tables.append(t)
    bar.close()
    return tables
