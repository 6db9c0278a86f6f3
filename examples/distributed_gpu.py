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
          batch, and prints tokens/s and the speed-up (the other ranks wait meanwhile). It
          does so for each of --impls: "mytorch" (the model above) and "stock" (the same
          model, same weights, on stock PyTorch: F.rms_norm, the rotate-half RoPE formula,
          scaled_dot_product_attention, silu(gate) * up, F.cross_entropy), so that the
          scaling of both is read on the same GPUs in the same run.

Without a GPU it runs on the CPU (gloo, float32) with the same code: useful to try the
script, not to time it.
"""
from __future__ import annotations

import argparse
import datetime
import os
import time

# This script uses CPU / CUDA tensors only. Without a GPU, the mytorch device would become
# torch's accelerator and FSDP2 would look for its streams, which it has not. Set before
# torch is imported: `import torch` loads the device itself (the torch.backends entry point).
os.environ.setdefault("MYTORCH_DEVICE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mytorch_ext  # noqa: E402
from mytorch_ext.ops.activation import swiglu  # noqa: E402
from mytorch_ext.ops.loss import fused_cross_entropy  # noqa: E402
from mytorch_ext.ops.norm import rms_norm  # noqa: E402
from mytorch_ext.ops.rope import rope  # noqa: E402


# ---- the ops: mytorch's kernels, or stock PyTorch's for the comparison ----
def _mytorch_attention(q, k, v):
    return mytorch_ext.flash_attn(q, k, v, causal=True)


def _stock_rope(x, cos, sin):
    """rope() as Llama writes it: x * cos + rotate_half(x) * sin; x (batch, seq, heads,
    head_dim), cos and sin (seq, head_dim / 2)."""
    cos, sin = (torch.cat((t, t), -1)[:, None, :] for t in (cos, sin))
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def _stock_attention(q, k, v):
    """(batch, seq, heads, head_dim) in and out, through scaled_dot_product_attention."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=True)
    return out.transpose(1, 2)


OPS = {
    "mytorch": dict(rms_norm=rms_norm, rope=rope, attention=_mytorch_attention, swiglu=swiglu,
                    cross_entropy=fused_cross_entropy),
    "stock": dict(rms_norm=F.rms_norm, rope=_stock_rope, attention=_stock_attention,
                  swiglu=lambda gate, up: F.silu(gate) * up, cross_entropy=F.cross_entropy),
}


# ---- the model ----
class RMSNorm(nn.Module):
    def __init__(self, dim: int, impl: str, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps, self.ops = nn.Parameter(torch.ones(dim)), eps, OPS[impl]

    def forward(self, x):
        return self.ops["rms_norm"](x, (x.shape[-1],), self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, impl: str):
        super().__init__()
        self.heads, self.head_dim, self.ops = heads, dim // heads, OPS[impl]
        self.attn_norm, self.mlp_norm = RMSNorm(dim, impl), RMSNorm(dim, impl)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        b, n, _ = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, n, 3, self.heads, self.head_dim).unbind(2)
        ops = self.ops
        q, k = ops["rope"](q, cos, sin), ops["rope"](k, cos, sin)
        dtype = torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(
            x.device.type) else q.dtype
        att = ops["attention"](q.to(dtype), k.to(dtype), v.to(dtype))
        x = x + self.out(att.reshape(b, n, -1))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(ops["swiglu"](gate.contiguous(), up.contiguous()))


class TinyLlama(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq: int,
                 impl: str = "mytorch"):
        super().__init__()
        self.ops = OPS[impl]
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, 4 * dim * 2 // 3 // 64 * 64, impl)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim, impl)
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
        return self.ops["cross_entropy"](logits.flatten(0, 1), targets.flatten())


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


def build_model(args, device, impl: str = "mytorch"):
    """The model, with the same weights for either impl (the ops hold no parameters)."""
    torch.manual_seed(0)
    return TinyLlama(args.vocab, args.dim, args.layers, args.heads, args.seq, impl).to(device)


def global_batches(args, world: int, steps: int, device):
    """The same token batches on every rank: per-rank batch x world sequences each."""
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        tokens = torch.randint(0, args.vocab, (args.batch * world, args.seq + 1), generator=g)
        yield tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def wrap(model, mode: str, device, blocks_per_unit: int = 1, reshard_after_forward: bool = True):
    """DDP, or FSDP2 with one unit per `blocks_per_unit` blocks, then the root. Each unit costs
    the host a few hundred microseconds per all-gather and reduce-scatter, so at small batches
    fewer, larger units (and no re-gather in the backward) scale better."""
    if mode == "ddp":
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.fsdp import fully_shard

    blocks = list(model.blocks)
    for i in range(0, len(blocks), blocks_per_unit):
        unit = blocks[i:i + blocks_per_unit]
        fully_shard(unit if len(unit) > 1 else unit[0], reshard_after_forward=reshard_after_forward)
    fully_shard(model)
    return model


def wrap_args(model, args, device):
    return wrap(model, args.mode, device, args.fsdp_blocks_per_unit, not args.fsdp_no_reshard)


def train(model, batches, device, rank: int, world: int, lr: float, optimizer: str):
    params = list(model.parameters())
    opt = (torch.optim.SGD(params, lr=lr) if optimizer == "sgd"
           else torch.optim.AdamW(params, lr=lr, weight_decay=0.1,
                                  fused=True if optimizer == "adamw-fused" else None))
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
    model = wrap_args(build_model(args, device), args, device)
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
    """Per impl: the distributed run (slowest rank's time), then rank 0 alone on the whole
    global batch; rank 0 prints the table."""
    optimizer = "adamw-fused" if args.fused_adamw else "adamw"

    def timed(model, ranks: int, my_rank: int):
        batches = list(global_batches(args, world, args.warmup + args.steps, device))
        train(model, batches[:args.warmup], device, my_rank, ranks, args.lr, optimizer)
        sync(device)
        t0 = time.perf_counter()
        losses = train(model, batches[args.warmup:], device, my_rank, ranks, args.lr, optimizer)
        sync(device)
        return time.perf_counter() - t0, losses

    rows = []
    for impl in args.impls:
        model = wrap_args(build_model(args, device, impl), args, device)
        dist.barrier()
        seconds, _ = timed(model, world, rank)
        elapsed = torch.tensor([seconds], device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        del model
        single_seconds = None
        if rank == 0:
            if device.type == "cuda":
                torch.cuda.empty_cache()
            single_seconds, _ = timed(build_model(args, device, impl), 1, 0)  # the whole global batch
            if device.type == "cuda":
                torch.cuda.empty_cache()
        rows.append((impl, single_seconds, elapsed.item()))
        dist.barrier()
    if rank == 0:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print("\n" + report(args, world, name, rows), flush=True)
    dist.barrier()


def report(args, world: int, device_name: str, rows) -> str:
    """The --bench table: rows of (impl, seconds on 1 device, seconds on `world` devices) for
    args.steps steps of the same global batch."""
    tokens = args.batch * world * args.seq * args.steps
    lines = [f"{args.mode}, {world} x {device_name}, global batch {args.batch * world} x {args.seq} "
             f"tokens, {args.steps} timed steps after {args.warmup}, torch {torch.__version__}",
             "| model ops | setup | step ms | tokens/s | speed-up |", "|---|---|---|---|---|"]
    for impl, single, spread in rows:
        lines.append(f"| {impl} | 1 device | {1000 * single / args.steps:.1f} | {tokens / single:.0f} | 1.00x |")
        lines.append(f"| {impl} | {world} devices ({args.mode}) | {1000 * spread / args.steps:.1f} | "
                     f"{tokens / spread:.0f} | {single / spread:.2f}x |")
    by_impl = {impl: (single, spread) for impl, single, spread in rows}
    if "mytorch" in by_impl and "stock" in by_impl:
        (m1, mn), (s1, sn) = by_impl["mytorch"], by_impl["stock"]
        lines.append(f"mytorch vs stock tokens/s: {s1 / m1:.2f}x on 1 device, {sn / mn:.2f}x on "
                     f"{world} devices")
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog=os.path.basename(__file__), description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("ddp", "fsdp"), default="ddp")
    ap.add_argument("--check", action="store_true", help="compare with one device")
    ap.add_argument("--bench", action="store_true", help="tokens/s against one device")
    ap.add_argument("--impls", default="mytorch,stock",
                    help="the models --bench times, comma-separated: mytorch (mytorch's kernels), "
                         "stock (the same model on stock PyTorch ops)")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank and step")
    ap.add_argument("--fsdp-blocks-per-unit", type=int, default=1, metavar="N",
                    help="FSDP2: N blocks per fully_shard unit (fewer units: less host work per step)")
    ap.add_argument("--fsdp-no-reshard", action="store_true",
                    help="FSDP2: keep the blocks' gathered parameters from the forward to the backward")
    ap.add_argument("--fused-adamw", action="store_true", help="--bench: AdamW(fused=True)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--check-steps", type=int, default=5)
    ap.add_argument("--check-lr", type=float, default=0.05)
    ap.add_argument("--check-tol", type=float, default=2e-2)
    ap.add_argument("--timeout", type=float, default=300, help="collective timeout, seconds")
    ap.add_argument("--out", metavar="DIR", default=None, help="accepted by every example; this one writes no files")
    args = ap.parse_args(argv)
    impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in impls if i not in OPS]
    if bad or not impls:
        ap.error(f"--impls takes a comma-separated list of {', '.join(OPS)}, got {args.impls!r}")
    args.impls = list(dict.fromkeys(impls))
    if args.dim % args.heads or (args.dim // args.heads) % 2:
        ap.error(f"--dim must be a multiple of --heads with an even head size, got --dim "
                 f"{args.dim} --heads {args.heads}")
    for name in ("steps", "batch", "seq", "layers", "vocab", "fsdp_blocks_per_unit"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if not (args.check or args.bench):
        args.check = True
    return args


def main(argv=None):
    args = parse_args(argv)
    device, rank, world = setup(args)
    try:
        if args.check:
            check(args, device, rank, world)
        if args.bench:
            bench(args, device, rank, world)
        # every rank past its last collective before any tears the group down: a gloo rank
        # whose peer closes the connections first can abort at exit
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
