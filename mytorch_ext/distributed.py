"""The ``mytorch`` c10d backend: ``torch.distributed`` collectives on mytorch tensors.

gloo accepts only CPU and CUDA tensors. mytorch memory is host memory, so this backend
gives gloo zero-copy CPU aliases of the device tensors (``cpu_alias``) and lets it work
on them in place; nothing is staged or copied back.

    import mytorch_ext.distributed            # registers the backend
    dist.init_process_group("mytorch")        # mytorch tensors (and CPU tensors) via gloo
    dist.init_process_group("cpu:gloo,mytorch:mytorch")   # the same, gloo itself for CPU

Collectives: all_reduce (SUM, AVG, PRODUCT, MIN, MAX), all_reduce_coalesced, broadcast,
reduce, all_gather (into a list and into a tensor), gather, scatter, reduce_scatter (a list
and a tensor), barrier, send / recv. ``DistributedDataParallel`` works on a model on the
``mytorch`` device.

The backend is a Python subclass of c10d's ``Backend`` where torch lets C++ call into such
a subclass, and of ``ProcessGroup`` otherwise (the older, long-supported route); both run
the same code (``_GlooOnAliases``).
"""
from __future__ import annotations

import datetime
import functools
from typing import Callable, Sequence

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _C10dBackend

from . import _C

__all__ = ["BACKEND_NAME", "register", "is_registered", "cpu_alias", "implementation",
           "SUPPORTED_REDUCE_OPS"]

BACKEND_NAME = "mytorch"
# Every op gloo can reduce with, plus AVG (a SUM divided by the group size).
SUPPORTED_REDUCE_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX")
_ALL_REDUCE_OPS = SUPPORTED_REDUCE_OPS + ("BAND", "BOR", "BXOR", "PREMUL_SUM")

_state = {"registered": False, "implementation": "auto"}


def cpu_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the same memory as a mytorch tensor (a CPU tensor is returned as is).

    Writes through the alias are writes to the device tensor; the alias keeps the device
    storage alive."""
    if tensor.device.type == "cpu":
        return tensor
    if tensor.device.type != BACKEND_NAME:
        raise TypeError(f"mytorch c10d backend: expected a tensor on the mytorch device or "
                        f"the CPU, got one on {tensor.device}")
    return _C._device.cpu_alias(tensor)


# ---- options ----
def _reduce_op_name(op) -> str:
    for name in _ALL_REDUCE_OPS:
        if op == getattr(dist.ReduceOp, name):
            return name
    return str(op)


def _check_reduce_op(collective: str, op, tensors: Sequence[torch.Tensor]) -> str:
    name = _reduce_op_name(op)
    if name not in SUPPORTED_REDUCE_OPS:
        raise ValueError(f"mytorch c10d backend: {collective} does not support the reduce op "
                         f"{name}; it accepts {', '.join(SUPPORTED_REDUCE_OPS)}")
    if name == "AVG":
        for t in tensors:
            if not (t.dtype.is_floating_point or t.dtype.is_complex):
                raise TypeError(f"mytorch c10d backend: {collective} with AVG needs a "
                                f"floating-point tensor, got {t.dtype}")
    return name


def _copy_timeout(src, dst):
    timeout = getattr(src, "timeout", None)
    if timeout is not None:
        dst.timeout = timeout
    return dst


def _reduce_opts(src, op_name: str, options=dist.AllreduceOptions):
    """Fresh options of type `options` for gloo: src's timeout, and the reduce op (gloo has no
    AVG: it sums, and the caller divides)."""
    opts = _copy_timeout(src, options())
    opts.reduceOp = dist.ReduceOp.SUM if op_name == "AVG" else getattr(dist.ReduceOp, op_name)
    return opts


def _check_same(collective: str, what: str, got, expected) -> None:
    if got != expected:
        raise ValueError(f"mytorch c10d backend: {collective} expected {what} {expected}, "
                         f"got {got}")


# ---- the collectives ----
class _GlooOnAliases:
    """Each collective: check the arguments, alias the tensors, run gloo on the aliases,
    and return a Work whose future holds the caller's tensors."""

    def _init_gloo(self, store, rank: int, size: int, timeout: datetime.timedelta) -> None:
        self._rank, self._size = rank, size
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self) -> str:  # noqa: N802  (c10d's name)
        return BACKEND_NAME

    def __repr__(self):
        return f"{type(self).__name__}(rank={self._rank}, size={self._size}, transport=gloo)"

    @staticmethod
    def _alias(collective: str, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for t in tensors:
            if t.device.type not in (BACKEND_NAME, "cpu"):
                raise TypeError(f"mytorch c10d backend: {collective} expected tensors on the "
                                f"mytorch device or the CPU, got one on {t.device}")
            out.append(cpu_alias(t))
        return out

    def _work(self, collective: str, gloo_work, result,
              after: Callable[[], None] | None = None):
        """A Work that completes with `result` once gloo's work (and then `after`) is done;
        it fails with gloo's error, said to come from this collective on this rank."""
        return _work_after(gloo_work, result, after, f"{collective} failed on rank "
                                                     f"{self._rank} of {self._size}")

    def _divide_by_size(self, tensors):
        return functools.partial(_divide_all, tensors, self._size)

    # all_reduce, reduce
    def allreduce(self, tensors, opts=None):
        return self._reduce("all_reduce", self._gloo.allreduce, dist.AllreduceOptions,
                            tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._reduce("all_reduce_coalesced", self._gloo.allreduce_coalesced,
                            dist.AllreduceCoalescedOptions, tensors, opts)

    def reduce(self, tensors, opts=None):
        return self._reduce("reduce", self._gloo.reduce, dist.ReduceOptions, tensors, opts)

    def _reduce(self, collective: str, gloo_call, options, tensors, opts):
        """gloo_call on the aliases; for AVG, each rank that gets the sum (every rank, or the
        root of a reduce) divides it by the group size afterwards."""
        opts = opts if opts is not None else options()
        op = _check_reduce_op(collective, opts.reduceOp, tensors)
        aliases = self._alias(collective, tensors)
        gloo_opts = _reduce_opts(opts, op, options)
        gets_sum = True
        if options is dist.ReduceOptions:
            gloo_opts.rootRank, gloo_opts.rootTensor = opts.rootRank, opts.rootTensor
            gets_sum = self._rank == opts.rootRank
        work = gloo_call(aliases, gloo_opts)
        after = self._divide_by_size(aliases) if op == "AVG" and gets_sum else None
        return self._work(collective, work, list(tensors), after)

    # broadcast, gather, scatter
    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        work = self._gloo.broadcast(self._alias("broadcast", tensors), opts)
        return self._work("broadcast", work, list(tensors))

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else _allgather_options()
        outs = [self._alias("all_gather", outputs) for outputs in output_lists]
        for outputs in output_lists:
            _check_same("all_gather", "an output list of length (the group size)",
                        len(outputs), self._size)
        work = self._gloo.allgather(outs, self._alias("all_gather", inputs), opts)
        return self._work("all_gather", work, [list(o) for o in output_lists])

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else _allgather_options()
        outs = [self._alias("all_gather_coalesced", outputs) for outputs in output_lists]
        work = self._gloo.allgather_coalesced(outs, self._alias("all_gather_coalesced", inputs),
                                              opts)
        return self._work("all_gather_coalesced", work, [list(o) for o in output_lists])

    def all_gather_single(self, output, input, opts=None):  # noqa: A002
        """all_gather_into_tensor: output holds the group's inputs one after another."""
        _check_same("all_gather_into_tensor", "an output of numel (input numel x group size)",
                    output.numel(), input.numel() * self._size)
        if not output.is_contiguous():
            raise ValueError("mytorch c10d backend: all_gather_into_tensor expected a "
                             "contiguous output tensor")
        chunks = list(output.reshape(self._size, *input.shape).unbind(0))
        opts = opts if opts is not None else _allgather_options()
        work = self._gloo.allgather([self._alias("all_gather_into_tensor", chunks)],
                                    self._alias("all_gather_into_tensor", [input.contiguous()]),
                                    opts)
        return self._work("all_gather_into_tensor", work, output)

    _allgather_base = all_gather_single  # the name before torch 2.14

    def gather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        outs = [self._alias("gather", outputs) for outputs in output_lists]
        work = self._gloo.gather(outs, self._alias("gather", inputs), opts)
        return self._work("gather", work, [list(o) for o in output_lists])

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        ins = [self._alias("scatter", inputs) for inputs in input_lists]
        work = self._gloo.scatter(self._alias("scatter", outputs), ins, opts)
        return self._work("scatter", work, list(outputs))

    # reduce_scatter: gloo has none, so all-reduce a packed copy and keep this rank's part.
    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        _check_same("reduce_scatter", "one output per input list", len(outputs),
                    len(input_lists))
        op = _check_reduce_op("reduce_scatter", opts.reduceOp, outputs)
        out_aliases = self._alias("reduce_scatter", outputs)
        packed = []
        for out, inputs in zip(out_aliases, input_lists):
            _check_same("reduce_scatter", "an input list of length (the group size)",
                        len(inputs), self._size)
            for t in inputs:
                _check_same("reduce_scatter", "every input of shape (the output's shape)",
                            tuple(t.shape), tuple(out.shape))
            packed.append(torch.stack(self._alias("reduce_scatter", inputs)))
        work = self._gloo.allreduce(packed, _reduce_opts(opts, op))

        keep_own_part = functools.partial(_keep_part, out_aliases, packed, self._rank,
                                          self._size if op == "AVG" else 1)
        return self._work("reduce_scatter", work, list(outputs), keep_own_part)

    def reduce_scatter_single(self, output, input, opts=None):  # noqa: A002
        """reduce_scatter_tensor: input holds one output-sized part per rank."""
        _check_same("reduce_scatter_tensor", "an input of numel (output numel x group size)",
                    input.numel(), output.numel() * self._size)
        return self.reduce_scatter(
            [output], [list(input.reshape(self._size, *output.shape).unbind(0))], opts)

    _reduce_scatter_base = reduce_scatter_single  # the name before torch 2.14

    # point to point (gloo's own work: these have no future, and nothing to do after)
    def send(self, tensors, dst: int, tag: int = 0):
        return self._gloo.send(self._alias("send", tensors), dst, tag)

    def recv(self, tensors, src: int, tag: int = 0):
        return self._gloo.recv(self._alias("recv", tensors), src, tag)

    def recv_anysource(self, tensors, tag: int = 0):
        return self._gloo.recv_anysource(self._alias("recv", tensors), tag)

    def barrier(self, opts=None):
        gloo_opts = _copy_timeout(opts, dist.BarrierOptions()) if opts is not None else \
            dist.BarrierOptions()
        return self._work("barrier", self._gloo.barrier(gloo_opts), [])


# The callbacks below run on gloo's threads. They hold tensors and numbers, never the
# backend: were they to drop its last reference there, gloo would join its own thread.
def _work_after(gloo_work, result, after, failure: str):
    def finish(fut):
        try:
            fut.value()
        except Exception as e:  # noqa: BLE001  e.g. a peer died or timed out
            raise RuntimeError(f"mytorch c10d backend: {failure}: {e}") from e
        if after is not None:
            after()
        return result

    return _FutureWork(gloo_work.get_future().then(finish))


class _FutureWork(dist._Work):
    """A Work over a future whose wait() raises the future's error (the Work that
    _create_work_from_future makes returns from wait() even when its future failed)."""

    def __init__(self, future: torch.futures.Future):
        super().__init__()
        self._future = future

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        # gloo ends a stuck collective at the group's timeout; this raises its error
        self._future.wait()
        return True

    def is_completed(self) -> bool:
        return self._future.done()

    def get_future(self) -> torch.futures.Future:
        return self._future


def _divide_all(tensors, divisor: int) -> None:
    for t in tensors:
        t.div_(divisor)


def _keep_part(outputs, packed, rank: int, divisor: int) -> None:
    for out, whole in zip(outputs, packed):
        out.copy_(whole[rank])
        if divisor != 1:
            out.div_(divisor)


def _allgather_options():
    return torch._C._distributed_c10d.AllgatherOptions()


class MytorchBackend(_GlooOnAliases, _C10dBackend):
    """The backend as a c10d Backend: one of the process group's per-device backends."""

    def __init__(self, store, rank, size, timeout):
        _C10dBackend.__init__(self, rank, size)
        self._init_gloo(store, rank, size, timeout)


class MytorchProcessGroup(_GlooOnAliases, dist.ProcessGroup):
    """The backend as a whole ProcessGroup (torch versions that cannot call into a Python
    Backend). It serves CPU tensors too, through the same gloo."""

    def __init__(self, store, rank, size, timeout):
        dist.ProcessGroup.__init__(self, rank, size)
        self._init_gloo(store, rank, size, timeout)

    def getRank(self):  # noqa: N802
        return self._rank

    def getSize(self):  # noqa: N802
        return self._size


@functools.lru_cache(maxsize=None)
def _python_backend_dispatches() -> bool:
    """Whether C++ calls reach a Python subclass of c10d's Backend in this torch."""
    class _Probe(_C10dBackend):
        def getBackendName(self):  # noqa: N802
            return "probe"

    try:
        return _C10dBackend.name(_Probe(0, 1)) == "probe"
    except Exception:  # noqa: BLE001  (no trampoline: construction or the call fails)
        return False


def implementation() -> str:
    """"backend" or "process_group": the class that init_process_group gets."""
    choice = _state["implementation"]
    if choice == "auto":
        return "backend" if _python_backend_dispatches() else "process_group"
    return choice


def _create(store, rank, size, timeout):
    cls = MytorchBackend if implementation() == "backend" else MytorchProcessGroup
    return cls(store, rank, size, timeout)


def is_registered() -> bool:
    return _state["registered"]


def register(implementation: str = "auto") -> None:
    """Registers the ``mytorch`` c10d backend (idempotent; importing this module does it).

    ``implementation``: "auto" (a c10d Backend where torch supports Python backends,
    otherwise a ProcessGroup), "backend" or "process_group"."""
    if implementation not in ("auto", "backend", "process_group"):
        raise ValueError(f"mytorch c10d backend: implementation must be 'auto', 'backend' or "
                         f"'process_group', got {implementation!r}")
    if implementation == "backend" and not _python_backend_dispatches():
        raise RuntimeError(f"mytorch c10d backend: torch {torch.__version__} cannot call into "
                           "a Python c10d Backend; use implementation='process_group'")
    _state["implementation"] = implementation
    if _state["registered"]:
        return
    if torch._C._get_privateuse1_backend_name() != BACKEND_NAME:
        raise RuntimeError("mytorch c10d backend: the mytorch device is not registered in this "
                           "process; call mytorch_ext.register_device() (or set "
                           "MYTORCH_DEVICE=1) before importing mytorch_ext.distributed")
    # cpu too, so that init_process_group("mytorch") alone also serves CPU tensors; gloo
    # stays the default for cpu and serves it under "cpu:gloo,mytorch:mytorch".
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=[BACKEND_NAME, "cpu"])
    _state["registered"] = True


if dist.is_available() and torch._C._get_privateuse1_backend_name() == BACKEND_NAME:
    register()
