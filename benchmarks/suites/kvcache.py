"""kvcache: one decoding attention step, mytorch's flash_attn_with_kvcache (append the new
token into the cache, then attend; split-KV picked by the heuristic) against SDPA on the same
cache already holding the token: on CUDA each SDPA backend that accepts the call (flash,
efficient, cuDNN; GQA through enable_gqa) and the best of them, on the CPU ATen's SDPA (its
flash kernel, the faster of enable_gqa and a cache with the kv heads repeated). Shapes: batch 1 with a long GQA cache, batch 64 with a 4k cache, and between.
Every row is checked against SDPA's math backend in float32 before it is timed.

A second table times Hugging Face `generate()` (greedy, a Llama built from a config, random
weights) with attn_implementation="mytorch" against the same model with "sdpa", with a static
and with a dynamic cache: tokens/s of the new tokens, prompt included in the time. On CUDA
(quick, full) a 1B-class model (d2048, 16 layers, GQA 32:8), batch 8, a 2048-token prompt and
256 new tokens; elsewhere a small one. The row says how many of the greedy tokens agree.
With a static cache on CUDA, transformers compiles the decode step itself: there the mytorch
attention runs its dense kernel (the kvcache route is for eager steps, as in the dynamic row).
"""
from __future__ import annotations

import importlib.util
import statistics
import time

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
    if dev == device and importlib.util.find_spec("transformers") is not None:
        tables.append(generate_table(dev, mode, progress))
    return tables


# (layers, hidden, heads, kv heads, ffn, vocab, batch, prompt, new tokens)
GENERATE = {"cuda": {"smoke": (2, 256, 8, 2, 512, 1024, 2, 64, 16),
                     "quick": (16, 2048, 32, 8, 8192, 128256, 8, 2048, 256),
                     "full": (16, 2048, 32, 8, 8192, 128256, 8, 2048, 256)},
            "cpu": {"smoke": (2, 128, 4, 2, 256, 512, 2, 32, 8),
                    "quick": (2, 256, 8, 2, 512, 1024, 2, 128, 32),
                    "full": (4, 512, 8, 2, 1024, 4096, 4, 512, 64)}}


def _generate_model(dev, attn, layers, hidden, heads, kv_heads, ffn, vocab, dtype=None):
    from transformers import LlamaConfig, LlamaForCausalLM

    import mytorch_ext  # noqa: F401  (registers attn_implementation="mytorch")

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=8192,
                      attn_implementation=attn)
    torch.manual_seed(0)
    if dtype is None:
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    with torch.device(dev):  # initialised where it runs (a 1B model's init on the host takes long)
        return LlamaForCausalLM(cfg).to(dtype).eval()


def _argmax_agreement(model, seqs, new):
    """Share of the last `new` tokens of seqs that model's own argmax picks, given the same
    prefix, in one forward pass (teacher forcing): how faithful greedy decoding was to the
    model, free of the way one flipped near-tie changes every later token of a generation."""
    with torch.no_grad():
        logits = model(seqs[:, :-1], logits_to_keep=new).logits
    return (logits.argmax(-1) == seqs[:, -new:]).float().mean().item()


def generate_table(dev: str, mode: str, progress) -> Table:
    """tokens/s of greedy generate(), attn_implementation="mytorch" against "sdpa", two models
    of the same weights. With a dynamic cache they alternate call by call, so that a change in
    the host's speed during the run (these set-ups are host-bound) falls on both. With a static
    cache generate() compiles the decode step, and two models compiled side by side share
    dynamo's caches of the same code (one model's calls then ran 10 % slower than alone): each
    model runs its calls in a row, after torch._dynamo.reset()."""
    layers, hidden, heads, kv_heads, ffn, vocab, batch, prompt, new = GENERATE[dev][mode]
    reps = {"smoke": 1, "quick": 3, "full": 5}[mode]
    where = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    t = Table(f"generate(), Llama {layers} layers d{hidden} GQA {heads}:{kv_heads}, batch {batch}, "
              f"{prompt}-token prompt + {new} new, {where}", "tokens/s",
              "new tokens / seconds of one greedy generate() call, prompt included; median of "
              f"{reps} after a warm-up, the set-ups' calls alternating (static cache: in a row each); tokens equal: the share of "
              "new tokens equal to sdpa's; argmax agreement: the share of each set-up's new tokens "
              "that the sdpa model's argmax picks from the same prefix in one forward pass",
              ["mytorch", "sdpa"])
    ids = torch.randint(0, vocab, (batch, prompt), generator=torch.Generator().manual_seed(0)).to(dev)
    bar = progress(2, f"generate ({dev})")
    models = {attn: _generate_model(dev, attn, layers, hidden, heads, kv_heads, ffn, vocab)
              for attn in ("mytorch", "sdpa")}
    for cache in ("static", "dynamic"):
        kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0,
                  attention_mask=torch.ones_like(ids))
        if cache == "static":
            kw["cache_implementation"] = "static"
        times, seqs = {a: [] for a in models}, {}
        if cache == "static":  # each model's calls in a row, dynamo's caches cleared first
            rounds = [(i, a) for a in models for i in range(reps + 1)]
        else:  # the two models alternate
            rounds = [(i, a) for i in range(reps + 1) for a in models]
        for i, attn in rounds:  # generate() as users call it (it turns gradients off)
            if cache == "static" and i == 0:
                torch._dynamo.reset()
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            seqs[attn] = models[attn].generate(ids, **kw)
            if dev == "cuda":
                torch.cuda.synchronize()
            if i:  # the first call of each model warms up (kernel compilation, allocator)
                times[attn].append(time.perf_counter() - t0)
        same = (seqs["mytorch"][:, prompt:] == seqs["sdpa"][:, prompt:]).float().mean().item()
        agree = {a: _argmax_agreement(models["sdpa"], seqs[a], new) for a in models}
        t.add(f"{cache} cache (tokens equal {same:.0%}; argmax agreement mytorch {agree['mytorch']:.0%}, "
              f"sdpa {agree['sdpa']:.0%})", {a: batch * new / statistics.median(times[a]) for a in models})
        bar.step(f"{cache} cache")
    del models
    if dev == "cuda":
        torch.cuda.empty_cache()
    bar.close()
    return t
