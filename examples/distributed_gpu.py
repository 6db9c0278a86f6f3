"""Data-parallel training of a small Llama-style model built on mytorch kernels, under DDP
or FSDP2 (`fully_shard`), one process per GPU, NCCL.

    torchrun --nproc-per-node 2 examples/distributed_gpu.py --mode ddp --check --bench
    torchrun --nproc-per-node 8 examples/distributed_gpu.py --mode fsdp --bench

Attention is `torch.ops.mytorch.flash_attn` (Triton); RMSNorm, RoPE, SwiGLU and the
cross-entropy are mytorch's CUDA kernels. Matmuls run under bf16 autocast.

--check   trains --check-steps steps distributed, then rank 0 trains the same model alone
          on the whole global batch and compares losses and parameters (SGD, so the
          difference stays proportional to the gradients' rounding differences).
--bench   times --steps steps of the distributed run, then rank 0 alone on the same global
          batch, and prints tokens/s and the speed-up (the other ranks wait meanwhile).

Without a GPU it runs on the CPU (gloo, float32) with the same code: useful to try the
script, not to time it.
"""
from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

# This script uses CPU / CUDA tensors only. Without a GPU, the mytorch device would become
# torch's accelerator and FSDP2 would look for its streams, which it has not.
os.environ.setdefault("MYTORCH_DEVICE", "0")
import mytorch_ext  # noqa: E402
from mytorch_ext.ops.fused import fused_cross_entropy, rms_norm, rope, swiglu  # noqa: E402


# ---- the model ----
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        b, n, _ = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, n, 3, self.heads, self.head_dim).unbind(2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        dtype = torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(
            x.device.type) else q.dtype
        att = mytorch_ext.flash_attn(q.to(dtype), k.to(dtype), v.to(dtype), causal=True)
        x = x + self.out(att.reshape(b, n, -1))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(swiglu(gate.contiguous(), up.contiguous()))


class TinyLlama(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, 4 * dim * 2 // 3 // 64 * 64)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        n = tokens.shape[1]
        for block in self.blocks:
            x = block(x, self.cos[:n], self.sin[:n])
        logits = self.head(self.norm(x))
        return fused_cross_entropy(logits.flatten(0, 1), targets.flatten())


# ---- set-up ----
def setup(args):
    use_cuda = torch.cuda.is_available() and not args.cpu
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    if use_cuda:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device,
                                timeout=datetime.timedelta(seconds=args.timeout))
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(world, 1)))
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    return device, dist.get_rank(), dist.get_world_size()


def build_model(args, device):
    torch.manual_seed(0)
    return TinyLlama(args.vocab, args.dim, args.layers, args.heads, args.seq).to(device)


def global_batches(args, world: int, steps: int, device):
    """The same token batches on every rank: per-rank batch x world sequences each."""
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        tokens = torch.randint(0, args.vocab, (args.batch * world, args.seq + 1), generator=g)
        yield tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def wrap(model, mode: str, device):
    if mode == "ddp":
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def train(model, batches, device, rank: int, world: int, lr: float, optimizer: str):
    params = list(model.parameters())
    opt = (torch.optim.SGD(params, lr=lr) if optimizer == "sgd"
           else torch.optim.AdamW(params, lr=lr, weight_decay=0.1))
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    losses = []
    for tokens, targets in batches:
        per = tokens.shape[0] // world
        tokens, targets = tokens[rank * per:(rank + 1) * per], targets[rank * per:(rank + 1) * per]
        with autocast:
            loss = model(tokens, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(x) for x in losses]


def full_state(model) -> dict:
    """Unsharded CPU copies of the parameters (DTensors under FSDP2 are gathered)."""
    out = {}
    for name, p in model.named_parameters():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name.removeprefix("module.")] = t.detach().float().cpu()
    return out


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- the two jobs ----
def check(args, device, rank, world):
    start = {k: v.clone() for k, v in full_state(build_model(args, device)).items()}
    model = wrap(build_model(args, device), args.mode, device)
    losses = train(model, global_batches(args, world, args.check_steps, device), device, rank,
                   world, args.check_lr, "sgd")
    mean_losses = torch.tensor(losses, device=device)
    dist.all_reduce(mean_losses)
    mean_losses = (mean_losses / world).tolist()
    state = full_state(model)            # a collective under FSDP2: every rank takes part
    if rank == 0:
        reference = build_model(args, device)
        ref_losses = train(reference, global_batches(args, world, args.check_steps, device),
                           device, 0, 1, args.check_lr, "sgd")
        ref_state = full_state(reference)
        moved = sum((ref_state[k] - start[k]).norm() ** 2 for k in ref_state) ** 0.5
        diff = sum((state[k] - ref_state[k]).norm() ** 2 for k in ref_state) ** 0.5
        loss_diff = max(abs(a - b) / abs(b) for a, b in zip(mean_losses, ref_losses))
        relative = float(diff / moved)

        ok = relative < args.check_tol and loss_diff < args.check_tol
        print(f"check {args.mode} on {world} x {device.type}: losses {world} ranks "
              f"{[round(x, 4) for x in mean_losses]} vs 1 device "
              f"{[round(x, 4) for x in ref_losses]} (max relative diff {loss_diff:.2e}); "
              f"parameters |dist - single| / |single - start| = {relative:.2e} "
              f"(tolerance {args.check_tol:g}): {'PASS' if ok else 'FAIL'}", flush=True)
    dist.barrier()


def bench(args, device, rank, world):
    tokens_per_step = args.batch * world * args.seq

    def timed(model, ranks: int, my_rank: int):
        batches = list(global_batches(args, world, args.warmup + args.steps, device))
        train(model, batches[:args.warmup], device, my_rank, ranks, args.lr, "adamw")
        sync(device)
        t0 = time.perf_counter()
        losses = train(model, batches[args.warmup:], device, my_rank, ranks, args.lr, "adamw")
        sync(device)
        return time.perf_counter() - t0, losses

    model = wrap(build_model(args, device), args.mode, device)
    dist.barrier()
    seconds, _ = timed(model, world, rank)
    elapsed = torch.tensor([seconds], device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    del model
    if rank == 0:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        single_seconds, _ = timed(build_model(args, device), 1, 0)  # the whole global batch
        dist_tps = tokens_per_step * args.steps / elapsed.item()
        single_tps = tokens_per_step * args.steps / single_seconds
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print(f"\n{args.mode}, {world} x {name}, global batch {args.batch * world} x {args.seq} "
              f"tokens, {args.steps} timed steps after {args.warmup}, torch {torch.__version__}")
        print("| setup | step ms | tokens/s | speed-up |")
        print("|---|---|---|---|")
        print(f"| 1 device | {1000 * single_seconds / args.steps:.1f} | {single_tps:.0f} | 1.00x |")
        print(f"| {world} devices ({args.mode}) | {1000 * elapsed.item() / args.steps:.1f} | "
              f"{dist_tps:.0f} | {dist_tps / single_tps:.2f}x |", flush=True)
    dist.barrier()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("ddp", "fsdp"), default="ddp")
    ap.add_argument("--check", action="store_true", help="compare with one device")
    ap.add_argument("--bench", action="store_true", help="tokens/s against one device")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank and step")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--check-steps", type=int, default=5)
    ap.add_argument("--check-lr", type=float, default=0.05)
    ap.add_argument("--check-tol", type=float, default=2e-2)
    ap.add_argument("--timeout", type=float, default=300, help="collective timeout, seconds")
    ap.add_argument("--out", metavar="DIR", default=None, help="accepted by every example; this one writes no files")
    args = ap.parse_args()
    if not (args.check or args.bench):
        args.check = True
    device, rank, world = setup(args)
    try:
        if args.check:
            check(args, device, rank, world)
        if args.bench:
            bench(args, device, rank, world)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
