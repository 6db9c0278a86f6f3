"""DistributedDataParallel on the `mytorch` device: a CNN on scikit-learn's 8x8 digits,
one process per rank, collectives through mytorch's c10d backend (gloo on zero-copy CPU
aliases of the device memory).

    PYTHONPATH=.:python torchrun --nproc-per-node 2 examples/distributed_ddp_device.py

Each rank trains on its share of every epoch (DistributedSampler); DDP averages the
gradients, so all ranks hold the same model. Rank 0 prints the loss and test accuracy.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import mytorch_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_digits_cnn import lenet_digits, load_digits  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--out", metavar="DIR", default=None, help="accepted by every example; this one writes no files")
    args = ap.parse_args()

    if not hasattr(torch, "mytorch"):
        mytorch_ext.register_device()   # a CUDA machine: opt in to the mytorch device
    import mytorch_ext.distributed  # noqa: F401  registers the "mytorch" c10d backend

    dist.init_process_group("cpu:gloo,mytorch:mytorch")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("mytorch", rank % torch.mytorch.device_count())
    torch.mytorch.set_device(device)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    x_train, y_train, x_test, y_test = load_digits()
    train_set = TensorDataset(x_train, y_train)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    torch.manual_seed(0)
    model = DDP(lenet_digits().to(device))   # rank 0's parameters are broadcast here
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.stack([loss.detach() * len(yb), torch.tensor(float(len(yb)),
                                                                         device=device)])
        dist.all_reduce(total)                   # the epoch's mean loss over every rank
        if rank == 0:
            print(f"epoch {epoch + 1:2d}: loss {(total[0] / total[1]).item():.4f}", flush=True)
    seconds = time.perf_counter() - start

    if rank == 0:
        model.eval()
        with torch.no_grad():
            pred = model.module(x_test.to(device)).argmax(1).cpu()
        print(f"{world} ranks on the mytorch device: test accuracy "
              f"{(pred == y_test).float().mean().item():.2%} after {args.epochs} epochs, "
              f"{seconds:.1f} s; CPU fallbacks: {mytorch_ext.fallback_counts() or 'none'}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
