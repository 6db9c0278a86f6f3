"""Standalone mytorch: DataParallel over torch.distributed (gloo for CPU buffers, the mytorch
c10d backend for mytorch-device buffers) matches one process on the concatenated batch."""
from __future__ import annotations

import pytest
import torch

from dist_harness import run_ranks

STEPS, GLOBAL_BATCH, D_IN, D_HID, D_OUT = 5, 12, 9, 24, 4


def _dataset():
    from mytorch.data import TensorDataset

    g = torch.Generator().manual_seed(3)
    n = STEPS * GLOBAL_BATCH
    return TensorDataset(torch.randn(n, D_IN, generator=g),
                         torch.randint(0, D_OUT, (n,), generator=g))


def _model(device):
    import mytorch
    import mytorch.nn as nn

    mytorch.manual_seed(0)
    return nn.Sequential(nn.Linear(D_IN, D_HID), nn.LayerNorm(D_HID), nn.GELU(),
                         nn.Linear(D_HID, D_OUT)).to(device)


def _train(model, loader, device, after_backward=lambda: None):
    import mytorch
    import mytorch.functional as F

    opt = mytorch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
        opt.zero_grad()
        loss.backward()
        after_backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _params(model):
    return {k: v.data.detach().cpu().clone() for k, v in model.state_dict().items()}


def _data_parallel_worker(rank, world):
    import mytorch.distributed as mdist
    from mytorch.data import DataLoader, DistributedSampler

    out = {}
    for device in ("cpu", f"mytorch:{rank}"):
        model = _model(device)
        if rank == 1:   # a different start: DataParallel must take rank 0's parameters
            for p in model.parameters():
                p.data.add_(1.0)
        dp = mdist.DataParallel(model, bucket_cap_mb=0.0005)  # 512 B: several buckets
        ds = _dataset()
        sampler = DistributedSampler(ds, shuffle=False)        # world size and rank from dist
        loader = DataLoader(ds, batch_size=GLOBAL_BATCH // world, sampler=sampler)
        losses = _train(dp, loader, device, dp.sync_gradients)
        mean_loss = mdist.all_reduce(_scalar_tensor(losses[-1], device), op="avg").item()
        out[device.split(":")[0]] = {
            "params": {k.removeprefix("module."): v for k, v in _params(dp).items()},
            "losses": losses, "buckets": len(dp.buckets()), "mean_last_loss": mean_loss,
            "grad_device": str(next(iter(model.parameters())).grad.data.device)}
    return out


def _scalar_tensor(value, device):
    import mytorch

    return mytorch.tensor([value], device=device)


def test_data_parallel_matches_one_process_on_the_whole_batch(tmp_path):
    import mytorch.distributed  # noqa: F401  (fails here, not in a child, if it cannot import)
    from mytorch.data import DataLoader

    results = run_ranks(_data_parallel_worker, tmp_path, world_size=2,
                        backend="cpu:gloo,mytorch:mytorch")
    devices = ["cpu"] + (["mytorch"] if hasattr(torch, "mytorch") else [])
    for device in devices:
        ref_model = _model(device)
        ref_losses = _train(ref_model, DataLoader(_dataset(), batch_size=GLOBAL_BATCH), device)
        ref = _params(ref_model)
        start = _params(_model("cpu"))
        for rank, res in enumerate(results):
            got = res[device]
            assert got["buckets"] > 1
            assert got["grad_device"].startswith(device)
            for name, expected in ref.items():
                torch.testing.assert_close(got["params"][name], expected, rtol=1e-5, atol=1e-5,
                                           msg=lambda m: f"{device}, rank {rank}, {name}: {m}")
                assert not torch.allclose(expected, start[name])
        mean_losses = [(a + b) / 2 for a, b in zip(results[0][device]["losses"],
                                                   results[1][device]["losses"])]
        torch.testing.assert_close(torch.tensor(mean_losses), torch.tensor(ref_losses),
                                   rtol=1e-5, atol=1e-5)
        assert results[0][device]["mean_last_loss"] == pytest.approx(mean_losses[-1], rel=1e-6)


def test_distributed_sampler_needs_a_world_or_explicit_ranks():
    import torch.distributed as dist

    from mytorch.data import DistributedSampler

    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="num_replicas and rank were not given and "
                                         "torch.distributed is not initialized"):
        DistributedSampler(list(range(10)))
    with pytest.raises(ValueError, match="num_replicas must be at least 1, got 0"):
        DistributedSampler(list(range(10)), 0, 0)
    parts = [list(DistributedSampler(list(range(10)), 4, r, shuffle=False)) for r in range(4)]
    assert parts == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]


def test_data_parallel_bad_input():
    import mytorch.distributed as mdist
    import mytorch.nn as nn

    with pytest.raises(RuntimeError, match="torch.distributed is not initialized; call "
                                           "mytorch.distributed.init_process_group"):
        mdist.DataParallel(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="expected a mytorch.nn.Module, got Linear"):
        mdist.DataParallel(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="unsupported reduce op 'band'; it accepts 'sum', "
                                         "'avg', 'max', 'min'"):
        mdist.all_reduce(torch.ones(2), op="band")


def test_default_backend_follows_the_devices_present():
    import mytorch.distributed as mdist

    expected = ["cpu:gloo"]
    if torch.cuda.is_available():
        expected.append("cuda:nccl")
    if hasattr(torch, "mytorch"):
        expected.append("mytorch:mytorch")
    assert mdist.default_backend() == (",".join(expected) if len(expected) > 1 else "gloo")
