"""Data-parallel training with standalone mytorch: an MLP on scikit-learn's 8x8 digits,
one process per rank, gradients averaged by `mytorch.distributed.DataParallel`.

    PYTHONPATH=.:python torchrun --nproc-per-node 2 examples/distributed_standalone.py
    PYTHONPATH=.:python torchrun --nproc-per-node 2 examples/distributed_standalone.py --device mytorch
    PYTHONPATH=.:python torchrun --nproc-per-node 4 examples/distributed_standalone.py --device cuda

The communication is torch.distributed's: gloo for CPU buffers, mytorch's c10d backend for
the mytorch device, NCCL for CUDA. Rank 0 prints the loss and the test accuracy.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import digits  # noqa: E402

import mytorch  # noqa: E402
import mytorch.distributed as mdist  # noqa: E402
import mytorch.functional as F  # noqa: E402
import mytorch.nn as nn  # noqa: E402
from mytorch.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "mytorch", "cuda"), default="cpu")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--out", metavar="DIR", default=None, help="accepted by every example; this one writes no files")
    args = ap.parse_args()

    import torch

    if args.device == "mytorch" and not hasattr(torch, "mytorch"):
        import mytorch_ext

        mytorch_ext.register_device()     # a CUDA machine: opt in to the mytorch device
    mdist.init_process_group()            # cpu:gloo, plus mytorch:mytorch / cuda:nccl
    rank, world = mdist.get_rank(), mdist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.device == "mytorch":
        device = f"mytorch:{local_rank % torch.mytorch.device_count()}"
    else:
        device = f"cuda:{local_rank}" if args.device == "cuda" else "cpu"
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    xtr, xte, ytr, yte = digits(image=False)
    train_set = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(train_set, seed=0)          # world and rank from dist
    loader = DataLoader(train_set, args.batch_size, sampler=sampler)

    mytorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    model = mdist.DataParallel(model)                         # rank 0's parameters
    opt = mytorch.optim.AdamW(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
            opt.zero_grad()
            loss.backward()
            model.sync_gradients()                            # the mean over the ranks
            opt.step()
            total += loss.item()
        mean = mdist.all_reduce(mytorch.tensor([total / len(loader)], device=device), op="avg")
        if rank == 0 and (epoch + 1) % 5 == 0:
            print(f"epoch {epoch + 1:2d}: loss {mean.item():.4f}", flush=True)
    seconds = time.perf_counter() - start

    if rank == 0:
        model.eval()
        with mytorch.no_grad():
            pred = model(mytorch.tensor(xte).to(device)).argmax(dim=1).numpy()
        print(f"{world} ranks, standalone mytorch on {args.device}: test accuracy "
              f"{(pred == yte).mean():.2%} after {args.epochs} epochs, {seconds:.1f} s; {model}")
    mdist.destroy_process_group()


if __name__ == "__main__":
    main()
