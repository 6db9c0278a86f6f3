"""The mytorch c10d backend: zero-copy aliases, and every collective checked for values
on random tensors across 2 processes (gloo underneath)."""
from __future__ import annotations

import gc

import pytest
import torch
import torch.distributed as dist

import mytorch_ext
from dist_harness import run_ranks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"),
                                reason="the mytorch device is not registered in this process")

if hasattr(torch, "mytorch"):
    import mytorch_ext.distributed as mdist


# ---- the alias, in one process ----
def test_cpu_alias_shares_memory_both_ways():
    base = torch.randn(5, 7, device="mytorch")
    view = base[1:4, ::2]                      # offset and strides
    alias = mdist.cpu_alias(view)
    assert alias.device.type == "cpu"
    assert alias.data_ptr() == view.data_ptr()
    assert (alias.shape, alias.stride()) == (view.shape, view.stride())
    torch.testing.assert_close(alias, view.cpu())
    alias.mul_(3.0)                            # a write through the alias ...
    expected = base.cpu()
    torch.testing.assert_close(view.cpu(), alias)   # ... is a write to the device tensor
    view.fill_(2.0)                            # and a write on the device shows in the alias
    assert bool((alias == 2.0).all())
    assert bool((base.cpu()[0] == expected[0]).all())  # outside the view: untouched


def test_cpu_alias_keeps_the_device_storage_alive():
    dev = torch.arange(6, dtype=torch.float32, device="mytorch")
    gc.collect()  # device tensors left in cycles by earlier tests of this process go first
    before = torch.mytorch.memory_allocated()
    alias = mdist.cpu_alias(dev)
    del dev
    gc.collect()
    assert torch.mytorch.memory_allocated() == before      # still held by the alias
    torch.testing.assert_close(alias, torch.arange(6, dtype=torch.float32))
    del alias
    gc.collect()
    assert torch.mytorch.memory_allocated() < before


def test_cpu_alias_bad_input():
    cpu = torch.ones(3)
    assert mdist.cpu_alias(cpu) is cpu
    with pytest.raises(RuntimeError, match="expected a tensor on the mytorch device, got one on cpu"):
        mytorch_ext._C._device.cpu_alias(cpu)
    with pytest.raises(TypeError, match="expected a tensor on the mytorch device or the CPU, got "
                                        "one on meta"):
        mdist.cpu_alias(torch.ones(3, device="meta"))


def test_registered_for_the_device():
    assert mdist.is_registered()
    assert dist.Backend.default_device_backend_map["mytorch"] == "mytorch"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"   # unchanged
    assert mdist.implementation() in ("backend", "process_group")
    with pytest.raises(ValueError, match="implementation must be 'auto', 'backend' or "
                                         "'process_group', got 'nccl'"):
        mdist.register("nccl")


# ---- collectives on 2 processes ----
def _rank_tensor(rank, shape, dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


def _collectives(rank, world):
    """Every check on the default group (the implementation torch supports best), then on
    a group made through the ProcessGroup implementation (the route for older torch)."""
    import mytorch_ext.distributed as mdist

    out = {mdist.implementation(): _check_collectives(rank, world, None)}
    mdist.register("process_group")
    group = dist.new_group(backend="mytorch")
    out[type(group).__name__] = _check_collectives(rank, world, group)
    return out


def _check_collectives(rank, world, group):

    # the single-tensor names (torch 2.14) or the older ones
    all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    reduce_scatter_single = (getattr(dist, "reduce_scatter_single", None)
                             or dist.reduce_scatter_tensor)

    dev = torch.device("mytorch", rank % torch.mytorch.device_count())
    close = torch.testing.assert_close
    checked = []
    ranks = range(world)

    # all_reduce: every supported op, odd shapes, float and int
    for op, reduce in [("SUM", lambda ts: torch.stack(ts).sum(0)),
                       ("AVG", lambda ts: torch.stack(ts).mean(0)),
                       ("MAX", lambda ts: torch.stack(ts).amax(0)),
                       ("MIN", lambda ts: torch.stack(ts).amin(0)),
                       ("PRODUCT", lambda ts: torch.stack(ts).prod(0))]:
        for shape, dtype in [((3, 5), torch.float32), ((1, 7, 1), torch.float64),
                             ((11,), torch.int64)]:
            if op == "AVG" and not dtype.is_floating_point:
                continue
            salt = len(checked)
            x = _rank_tensor(rank, shape, dtype, salt).to(dev)
            dist.all_reduce(x, op=getattr(dist.ReduceOp, op), group=group)
            assert x.device == dev
            close(x.cpu(), reduce([_rank_tensor(r, shape, dtype, salt) for r in ranks]))
            checked.append(f"all_reduce {op} {dtype}")

    # async all_reduce: the work's future holds the device tensor itself
    x = _rank_tensor(rank, (4, 3), salt=90).to(dev)
    work = dist.all_reduce(x, async_op=True, group=group)
    work.wait()
    (fut_value,) = work.get_future().value()
    assert fut_value.device == dev and fut_value.data_ptr() == x.data_ptr()
    close(x.cpu(), sum(_rank_tensor(r, (4, 3), salt=90) for r in ranks))
    checked.append("all_reduce async")

    # a CPU tensor in the same group
    c = _rank_tensor(rank, (6,), salt=91)
    dist.all_reduce(c, group=group)
    close(c, sum(_rank_tensor(r, (6,), salt=91) for r in ranks))
    checked.append("all_reduce cpu")

    # broadcast from the last rank
    src = world - 1
    b = _rank_tensor(rank, (2, 9), salt=92).to(dev)
    dist.broadcast(b, src=src, group=group)
    close(b.cpu(), _rank_tensor(src, (2, 9), salt=92))
    checked.append("broadcast")

    # all_gather into a list and into a tensor
    mine = _rank_tensor(rank, (3, 4), salt=93).to(dev)
    outs = [torch.empty(3, 4, device=dev) for _ in ranks]
    dist.all_gather(outs, mine, group=group)
    for r in ranks:
        close(outs[r].cpu(), _rank_tensor(r, (3, 4), salt=93))
    flat = torch.empty(world * 3, 4, device=dev)
    all_gather_single(flat, mine, group=group)
    close(flat.cpu(), torch.cat([_rank_tensor(r, (3, 4), salt=93) for r in ranks]))
    checked.append("all_gather")

    # reduce_scatter from a list (SUM) and from a tensor (AVG, MAX)
    parts = [_rank_tensor(rank, (5,), salt=94 + j).to(dev) for j in ranks]
    out = torch.empty(5, device=dev)
    dist.reduce_scatter(out, parts, group=group)
    close(out.cpu(), sum(_rank_tensor(r, (5,), salt=94 + rank) for r in ranks))
    for op, reduce in [("AVG", lambda ts: torch.stack(ts).mean(0)),
                       ("MAX", lambda ts: torch.stack(ts).amax(0))]:
        whole = _rank_tensor(rank, (world * 2, 3), salt=99).to(dev)
        kept = whole.cpu()
        out = torch.empty(2, 3, device=dev)
        reduce_scatter_single(out, whole, op=getattr(dist.ReduceOp, op), group=group)
        expected = reduce([_rank_tensor(r, (world * 2, 3), salt=99) for r in ranks])
        close(out.cpu(), expected[2 * rank:2 * rank + 2])
        close(whole.cpu(), kept)   # the input is left as it was
    checked.append("reduce_scatter")

    # reduce to rank 0, gather, scatter
    x = _rank_tensor(rank, (4,), salt=100).to(dev)
    dist.reduce(x, dst=0, group=group)
    if rank == 0:
        close(x.cpu(), sum(_rank_tensor(r, (4,), salt=100) for r in ranks))
    g = _rank_tensor(rank, (2,), salt=101).to(dev)
    gathered = [torch.empty(2, device=dev) for _ in ranks] if rank == 0 else None
    dist.gather(g, gathered, dst=0, group=group)
    if rank == 0:
        for r in ranks:
            close(gathered[r].cpu(), _rank_tensor(r, (2,), salt=101))
    s = torch.empty(3, device=dev)
    pieces = [_rank_tensor(r, (3,), salt=102).to(dev) for r in ranks] if rank == 0 else None
    dist.scatter(s, pieces, src=0, group=group)
    close(s.cpu(), _rank_tensor(rank, (3,), salt=102))
    checked.append("reduce gather scatter")

    # send / recv around the ring, then isend / irecv back
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    sent = _rank_tensor(rank, (7,), salt=103).to(dev)
    got = torch.empty(7, device=dev)
    if rank % 2 == 0:
        dist.send(sent, nxt, group=group)
        dist.recv(got, prv, group=group)
    else:
        dist.recv(got, prv, group=group)
        dist.send(sent, nxt, group=group)
    close(got.cpu(), _rank_tensor(prv, (7,), salt=103))
    back = torch.empty(7, device=dev)
    reqs = [dist.isend(got, prv, group=group), dist.irecv(back, nxt, group=group)]
    for req in reqs:
        req.wait()
    close(back.cpu(), sent.cpu())
    checked.append("send recv")

    dist.barrier(group=group)
    checked.append("barrier")

    # bad input: raised on every rank before anything is sent
    errors = {}
    for name, call in [
        ("BAND", lambda: dist.all_reduce(torch.ones(2, device=dev), op=dist.ReduceOp.BAND,
                                         group=group)),
        ("AVG int", lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64, device=dev),
                                            op=dist.ReduceOp.AVG, group=group)),
        ("gather size", lambda: all_gather_single(torch.empty(world * 3 + 1, device=dev),
                                                            torch.ones(3, device=dev),
                                                            group=group)),
        ("scatter size", lambda: reduce_scatter_single(torch.empty(2, device=dev),
                                                            torch.ones(world * 2 + 1, device=dev),
                                                            group=group)),
    ]:
        try:
            call()
        except Exception as e:  # noqa: BLE001
            errors[name] = f"{type(e).__name__}: {e}"
    # the group still works after the refused calls
    x = torch.full((2,), float(rank + 1), device=dev)
    dist.all_reduce(x, group=group)
    close(x.cpu(), torch.full((2,), float(sum(r + 1 for r in ranks))))
    return {"checked": checked, "errors": errors}


COLLECTIVE_CHECKS = ["all_reduce SUM torch.float32", "all_reduce SUM torch.float64",
                     "all_reduce SUM torch.int64", "all_reduce AVG torch.float32",
                     "all_reduce AVG torch.float64", "all_reduce MAX torch.float32",
                     "all_reduce MAX torch.float64", "all_reduce MAX torch.int64",
                     "all_reduce MIN torch.float32", "all_reduce MIN torch.float64",
                     "all_reduce MIN torch.int64", "all_reduce PRODUCT torch.float32",
                     "all_reduce PRODUCT torch.float64", "all_reduce PRODUCT torch.int64",
                     "all_reduce async", "all_reduce cpu", "broadcast", "all_gather",
                     "reduce_scatter", "reduce gather scatter", "send recv", "barrier"]


def test_collectives_values(tmp_path):
    results = run_ranks(_collectives, tmp_path, world_size=2, backend="mytorch")
    for res in results:
        # the default group and a group of the ProcessGroup implementation
        assert "MytorchProcessGroup" in res and len(res) == 2
        for res_of_group in res.values():
            assert res_of_group["checked"] == COLLECTIVE_CHECKS
            assert res_of_group["errors"] == {
                "BAND": "ValueError: mytorch c10d backend: all_reduce does not support the "
                        "reduce op BAND; it accepts SUM, AVG, PRODUCT, MIN, MAX",
                "AVG int": "TypeError: mytorch c10d backend: all_reduce with AVG needs a "
                           "floating-point tensor, got torch.int64",
                "gather size": "ValueError: mytorch c10d backend: all_gather_into_tensor "
                               "expected an output of numel (input numel x group size) 6, got 7",
                "scatter size": "ValueError: mytorch c10d backend: reduce_scatter_tensor "
                                "expected an input of numel (output numel x group size) 4, got 5",
            }
