"""DistributedDataParallel on the mytorch device: 2 processes over the mytorch c10d backend
end with the same parameters as one process trained on the concatenated batch."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from dist_harness import run_ranks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"),
                                reason="the mytorch device is not registered in this process")

STEPS, GLOBAL_BATCH, D_IN, D_HID, D_OUT = 5, 12, 7, 16, 3


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D_IN, D_HID), nn.LayerNorm(D_HID), nn.GELU(),
                         nn.Linear(D_HID, D_OUT))


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(GLOBAL_BATCH, D_IN, generator=g),
             torch.randint(0, D_OUT, (GLOBAL_BATCH,), generator=g)) for _ in range(STEPS)]


def _train(model, batches, device, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    per_rank = GLOBAL_BATCH // world
    losses = []
    for x, y in batches:
        x = x[rank * per_rank:(rank + 1) * per_rank].to(device)
        y = y[rank * per_rank:(rank + 1) * per_rank].to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _ddp_worker(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP

    import mytorch_ext.distributed as mdist

    device = torch.device("mytorch", rank % torch.mytorch.device_count())
    torch.mytorch.set_device(device)

    def train_ddp(process_group=None):
        model = _model().to(device)
        if rank == 1:   # a different start on rank 1: DDP must broadcast rank 0's parameters
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1.0)
        losses = _train(DDP(model, process_group=process_group), _batches(), device, rank, world)
        return model, losses

    model, losses = train_ddp()
    # the same through the ProcessGroup implementation (torch without Python Backends)
    mdist.register("process_group")
    group = dist.new_group(backend="mytorch")
    model_pg, _ = train_ddp(group)
    pg_class = type(group).__name__
    # the CPU side of "cpu:gloo,mytorch:mytorch" is gloo itself
    cpu_backend = (type(dist.group.WORLD._get_backend(torch.device("cpu"))).__name__
                   if mdist.implementation() == "backend" else "ProcessGroupGloo")
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    return {"params": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "params_pg": {k: v.detach().cpu() for k, v in model_pg.state_dict().items()},
            "pg_class": pg_class, "losses": losses, "cpu_backend": cpu_backend, "cpu_sum": total.item(),
            "param_device": str(next(model.parameters()).device)}


def test_ddp_on_mytorch_matches_one_process_on_the_whole_batch(tmp_path):
    results = run_ranks(_ddp_worker, tmp_path, world_size=2, backend="cpu:gloo,mytorch:mytorch")

    reference = _model().to("mytorch")
    ref_losses = _train(reference, _batches(), torch.device("mytorch"))
    ref_params = {k: v.detach().cpu() for k, v in reference.state_dict().items()}
    start = {k: v.detach() for k, v in _model().state_dict().items()}

    for rank, res in enumerate(results):
        assert res["param_device"] == f"mytorch:{rank}"
        assert res["cpu_backend"] == "ProcessGroupGloo"
        assert res["cpu_sum"] == 3.0
        assert res["pg_class"] == "MytorchProcessGroup"
        for name, ref in ref_params.items():
            for key in ("params", "params_pg"):
                torch.testing.assert_close(res[key][name], ref, rtol=1e-5, atol=1e-5,
                                           msg=lambda m: f"rank {rank}, {key} {name}: {m}")
            assert not torch.allclose(ref, start[name])   # training moved every parameter
    # each rank's loss is the mean over its half; their mean is the whole-batch loss
    mean_losses = [(a + b) / 2 for a, b in zip(results[0]["losses"], results[1]["losses"])]
    torch.testing.assert_close(torch.tensor(mean_losses), torch.tensor(ref_losses),
                               rtol=1e-5, atol=1e-5)
