"""Data-parallel training for standalone mytorch, over ``torch.distributed``.

The communication is torch's (gloo for CPU and mytorch-device buffers, NCCL for CUDA);
this module only decides what to send. One process per device, started by ``torchrun``:

    import mytorch, mytorch.distributed as mdist
    mdist.init_process_group()                 # backend picked from the devices present
    model = mdist.DataParallel(build_model().to(device))   # rank 0's parameters everywhere
    loader = DataLoader(ds, 32, sampler=DistributedSampler(ds))   # this rank's share
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(); loss.backward()
        model.sync_gradients()                 # bucketed all-reduce: the mean over ranks
        opt.step()

mytorch's autograd has no per-parameter hooks, so the all-reduce runs after backward
(``sync_gradients``) instead of overlapping with it; within it, every bucket is in flight
at once.
"""
from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from ._kernels import K
from .nn.module import Module
from .tensor import Tensor

__all__ = ["DataParallel", "init_process_group", "default_backend", "destroy_process_group",
           "is_initialized", "get_rank", "get_world_size", "all_reduce", "broadcast", "barrier"]

_REDUCE_OPS = ("sum", "avg", "max", "min")


def default_backend() -> str:
    """"cpu:gloo,cuda:nccl" with a GPU, "cpu:gloo,mytorch:mytorch" with the mytorch device
    (which registers mytorch's c10d backend), otherwise "gloo"."""
    parts = ["cpu:gloo"]
    if torch.cuda.is_available():
        parts.append("cuda:nccl")
    if torch._C._get_privateuse1_backend_name() == "mytorch":
        import mytorch_ext.distributed  # noqa: F401  registers the "mytorch" c10d backend
        parts.append("mytorch:mytorch")
    return ",".join(parts) if len(parts) > 1 else "gloo"


def init_process_group(backend: str | None = None, timeout: float | None = None, **kwargs):
    """``torch.distributed.init_process_group`` with ``default_backend()`` when no backend is
    given; ``timeout`` in seconds. Rank, world size and rendezvous come from the environment
    (torchrun) unless given."""
    if timeout is not None:
        kwargs["timeout"] = datetime.timedelta(seconds=timeout)
    if backend is not None and "mytorch" in backend:
        import mytorch_ext.distributed  # noqa: F401
    dist.init_process_group(backend or default_backend(), **kwargs)


def destroy_process_group() -> None:
    dist.destroy_process_group()


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def _buffer(t):
    if isinstance(t, Tensor):
        return t.data
    if isinstance(t, torch.Tensor):
        return t
    raise TypeError(f"mytorch.distributed: expected a mytorch.Tensor, got {type(t).__name__}")


def _torch_op(collective: str, op: str):
    if op not in _REDUCE_OPS:
        raise ValueError(f"mytorch.distributed.{collective}: unsupported reduce op {op!r}; it "
                         f"accepts {', '.join(map(repr, _REDUCE_OPS))}")
    return {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.SUM}[op]


def _scale_(buf: torch.Tensor, factor: float) -> None:
    """buf *= factor, through a mytorch kernel."""
    buf.copy_(K.mul(buf, torch.full((), factor, dtype=buf.dtype, device=buf.device)))


def all_reduce(tensor, op: str = "sum", group=None):
    """In place over every rank: "sum", "avg", "max" or "min". Returns the tensor."""
    buf = _buffer(tensor)
    dist.all_reduce(buf, op=_torch_op("all_reduce", op), group=group)
    if op == "avg":
        _scale_(buf, 1.0 / dist.get_world_size(group))
    return tensor


def broadcast(tensor, src: int = 0, group=None):
    dist.broadcast(_buffer(tensor), src=src, group=group)
    return tensor


def barrier(group=None) -> None:
    dist.barrier(group=group)


class _Bucket:
    """Parameters of one device and dtype whose gradients travel in one flat buffer."""

    def __init__(self, params, device, dtype):
        self.params, self.device, self.dtype = params, device, dtype
        self.numel = sum(p.data.numel() for p in params)


class DataParallel(Module):
    """Wraps a module for data-parallel training across the ranks of a process group.

    On construction every rank takes rank 0's parameters and buffers. After
    ``loss.backward()``, ``sync_gradients()`` replaces each gradient by its mean over the
    ranks: gradients are packed, per device and dtype, into buckets of about
    ``bucket_cap_mb`` that are all-reduced together. A parameter without a gradient on
    this rank counts as a zero gradient. Calling the wrapper calls the module;
    ``state_dict`` keys carry a ``module.`` prefix, as with torch's DDP.
    """

    def __init__(self, module: Module, process_group=None, bucket_cap_mb: float = 25.0,
                 broadcast_buffers: bool = True):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected a mytorch.nn.Module, got "
                            f"{type(module).__name__}")
        if not is_initialized():
            raise RuntimeError("DataParallel: torch.distributed is not initialized; call "
                               "mytorch.distributed.init_process_group() first (under "
                               "torchrun, or with rank, world_size and init_method)")
        if bucket_cap_mb <= 0:
            raise ValueError(f"DataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.bucket_cap_bytes = int(bucket_cap_mb * 1024 * 1024)
        params = [p for p in module.parameters() if p.requires_grad]
        self._check_same_parameters(params)
        with torch.no_grad():
            for t in list(module.parameters()) + (list(module.buffers()) if broadcast_buffers
                                                  else []):
                dist.broadcast(t.data, src=dist.get_global_rank(process_group, 0)
                               if process_group is not None else 0, group=process_group)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _check_same_parameters(self, params) -> None:
        """Every rank must hold the same parameter shapes, or the all-reduce would mix them."""
        device = params[0].data.device if params else torch.device("cpu")
        signature = [len(params), sum(p.data.numel() for p in params),
                     hash(tuple(tuple(p.shape) for p in params)) % (2 ** 31)]
        # max(x) == -max(-x) on every rank exactly when all ranks agree
        both = torch.tensor(signature + [-v for v in signature], dtype=torch.int64).to(device)
        dist.all_reduce(both, op=dist.ReduceOp.MAX, group=self.process_group)
        both = both.tolist()
        if both[:3] != [-v for v in both[3:]]:
            raise ValueError(f"DataParallel: the ranks hold different parameters (this rank: "
                             f"{signature[0]} tensors, {signature[1]} elements); every rank "
                             "must build the same model")

    def buckets(self) -> list[_Bucket]:
        """The gradient buckets: per device and dtype, in reverse parameter order (the last
        layers' gradients are the first ones backward produces), each up to the cap."""
        buckets, open_bucket = [], {}
        for p in reversed([p for p in self.module.parameters() if p.requires_grad]):
            key = (p.data.device, p.data.dtype)
            nbytes = p.data.numel() * p.data.element_size()
            params, size = open_bucket.get(key, (None, 0))
            if params is None or (params and size + nbytes > self.bucket_cap_bytes):
                params, size = [], 0
                buckets.append((key, params))
            params.append(p)
            open_bucket[key] = (params, size + nbytes)
        return [_Bucket(params, device, dtype) for (device, dtype), params in buckets]

    def sync_gradients(self) -> None:
        """Averages every gradient over the ranks (call after backward, before step)."""
        pending = []
        for bucket in self.buckets():
            flat = torch.empty(bucket.numel, dtype=bucket.dtype, device=bucket.device)
            offset = 0
            for p in bucket.params:
                n = p.data.numel()
                if p.grad is None:
                    flat[offset:offset + n].zero_()
                else:
                    if p.grad.shape != p.shape:
                        raise RuntimeError(f"DataParallel: gradient of shape {p.grad.shape} for "
                                           f"a parameter of shape {p.shape}")
                    flat[offset:offset + n].copy_(p.grad.data.reshape(-1))
                offset += n
            pending.append((bucket, flat, dist.all_reduce(flat, group=self.process_group,
                                                          async_op=True)))
        for bucket, flat, work in pending:
            work.wait()
            mean = K.mul(flat, torch.full((), 1.0 / self.world_size, dtype=flat.dtype,
                                          device=flat.device))
            offset = 0
            for p in bucket.params:  # each gradient becomes a view of the averaged bucket
                n = p.data.numel()
                p.grad = Tensor(mean[offset:offset + n].view(p.data.shape))
                offset += n

    def __repr__(self):
        return (f"DataParallel(world_size={self.world_size}, buckets={len(self.buckets())}, "
                f"bucket_cap_mb={self.bucket_cap_bytes / 2 ** 20:g})")
