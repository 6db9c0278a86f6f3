"""FSDP2 wrap configurations of examples/distributed_gpu.py's model, mytorch and stock ops.

    CFGS=base,nors+fused,g4+nors+fused ROUNDS=2 torchrun --nproc-per-node 2 \\
        benchmarks/distributed_fsdp_units.py

Each configuration is timed for mytorch's ops and stock PyTorch's in turn (ROUNDS times), on
all ranks (slowest rank's time) and, as the baseline, on one GPU over the same global batch
(BATCH sequences per rank, default 4). A configuration names its parts with "+":
  base     one FSDP unit per block, then the root (the example's default)
  gN       N blocks per FSDP unit
  nors     reshard_after_forward=False on the blocks (no all-gather again in the backward)
  mp       MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)
  fused    AdamW(fused=True), on one GPU too
"host" is the median time for the Python of one step to return, without a sync.
"""
import importlib.util
import os
import time

os.environ.setdefault("MYTORCH_DEVICE", "0")
import torch
import torch.distributed as dist

spec = importlib.util.spec_from_file_location("dg", "examples/distributed_gpu.py")
dg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dg)

args = dg.parse_args(["--bench", "--mode", "fsdp", "--batch", os.environ.get("BATCH", "4")])
device, rank, world = dg.setup(args)
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy


def wrap(model, cfg):
    kw = {}
    if "mp" in cfg:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    rs = "nors" not in cfg
    g = int(cfg.split("g")[1][0]) if "+g" in cfg or cfg.startswith("g") else 1
    blocks = list(model.blocks)
    for i in range(0, len(blocks), g):
        fully_shard(blocks[i:i + g] if g > 1 else blocks[i], reshard_after_forward=rs, **kw)
    fully_shard(model, reshard_after_forward=("rootrs" in cfg), **kw)
    return model


def run(impl, cfg, ranks, steps=20, warm=5):
    model = dg.build_model(args, device, impl)
    if ranks > 1:
        model = wrap(model, cfg)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, fused=("fused" in cfg) or None)
    batches = list(dg.global_batches(args, world, warm + steps, device))
    my = rank if ranks > 1 else 0
    ac = torch.autocast("cuda", dtype=torch.bfloat16)

    def step(tokens, targets):
        per = tokens.shape[0] // ranks
        tokens, targets = tokens[my * per:(my + 1) * per], targets[my * per:(my + 1) * per]
        with ac:
            loss = model(tokens, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for b in batches[:warm]:
        step(*b)
    torch.cuda.synchronize()
    host = []
    t0 = time.perf_counter()
    for b in batches[warm:]:
        h = time.perf_counter()
        step(*b)
        host.append(time.perf_counter() - h)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps
    del model, opt
    torch.cuda.empty_cache()
    return wall, sorted(host)[len(host) // 2]


rows = []
cfgs = os.environ.get("CFGS").split(",")
for rnd in range(int(os.environ.get("ROUNDS", "2"))):
    single = {}
    for impl in ("mytorch", "stock"):
        if rank == 0:
            single[impl] = (run(impl, "", 1), run(impl, "fused", 1))
        dist.barrier()
    for cfg in cfgs:
        for impl in ("mytorch", "stock"):
            w, h = run(impl, cfg, world)
            t = torch.tensor([w, h], device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if rank == 0:
                base = single[impl][1] if "fused" in cfg else single[impl][0]
                rows.append(f"| {rnd} | {impl} | {cfg} | 1 GPU {1e3*base[0]:.1f} | "
                            f"2 GPUs {1e3*t[0].item():.1f} (host {1e3*t[1].item():.1f}) | {base[0]/t[0].item():.2f}x |")
                print(rows[-1], flush=True)
            dist.barrier()
dist.destroy_process_group()
