"""The mytorch c10d backend is the default for the mytorch device:
init_process_group(rank=r, world_size=n) with no backend picks it, as it picks nccl for cuda."""
from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"),
                                reason="the mytorch device is not registered in this process")


def test_registered_as_the_device_default():
    import mytorch_ext  # noqa: F401  (registering the device registers the backend)

    assert dist.Backend.default_device_backend_map.get("mytorch") == "mytorch"


def _no_backend_named(rank, world_size, store_dir):
    dist.init_process_group(init_method=f"file://{os.path.join(store_dir, 'store')}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        backend = dist.get_backend_config()
        x = torch.full((5,), float(rank + 1), device="mytorch")
        dist.all_reduce(x)
        gathered = [torch.empty(2, device="mytorch") for _ in range(world_size)]
        dist.all_gather(gathered, torch.full((2,), float(rank), device="mytorch"))
        return backend, x.cpu(), torch.stack([g.cpu() for g in gathered])
    finally:
        dist.destroy_process_group()


def test_init_process_group_without_backend(tmp_path):
    results = run_ranks(_no_backend_named, tmp_path, backend=None, args=(str(tmp_path),))
    for backend, total, gathered in results:
        assert backend == "mytorch:mytorch"
        torch.testing.assert_close(total, torch.full((5,), 3.0))
        torch.testing.assert_close(gathered, torch.tensor([[0.0, 0.0], [1.0, 1.0]]))


def _ddp_step(rank, world_size, store_dir):
    dist.init_process_group(init_method=f"file://{os.path.join(store_dir, 'store')}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).to("mytorch")
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        x = torch.full((2, 4), float(rank + 1), device="mytorch")
        ddp(x).sum().backward()
        return model.weight.grad.cpu()
    finally:
        dist.destroy_process_group()


def test_ddp_with_the_default_backend(tmp_path):
    g0, g1 = run_ranks(_ddp_step, tmp_path, backend=None, args=(str(tmp_path),))
    torch.testing.assert_close(g0, g1)
    # mean over ranks of the per-rank gradients: each row of x is (rank + 1), 2 rows
    torch.testing.assert_close(g0, torch.full((3, 4), (2 * 1.0 + 2 * 2.0) / 2))
