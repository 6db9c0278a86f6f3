"""``torch.compile`` for the mytorch device: the ``"mytorch"`` dynamo backend and the dynamo
device interface.

    model = model.to("mytorch")
    compiled = torch.compile(model)                     # the default Inductor backend
    compiled = torch.compile(model, backend="mytorch")  # the same, by name

mytorch memory is host memory, so the graph is compiled by Inductor as a CPU graph (its C++ /
OpenMP code generation) and run over zero-copy CPU aliases of the device tensors: the
generated code reads parameters and inputs, and writes in-place updates (BatchNorm running
statistics, optimizer-style mutations), directly in device memory. Graph outputs are
produced in host buffers that become device tensors without a copy (``device_alias``; these
bytes are not in ``torch.mytorch.memory_allocated()``). Autograd crosses the boundary both
ways (``_ToHost``, ``_ToDevice``), zero-copy too.

The backend and the interface are registered when ``torch._dynamo`` is first imported (or at
once if it already is), so importing mytorch_ext does not import dynamo.
"""
from __future__ import annotations

import torch

from . import _C

BACKEND_NAME = "mytorch"


def _cpu_alias(t: torch.Tensor) -> torch.Tensor:
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    return _C._device.cpu_alias(t)


def _device_alias(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    return _C._device.device_alias(t, device.index if device.index is not None else -1)


class _ToHost(torch.autograd.Function):
    """A CPU alias of a device tensor; its gradient comes back to the tensor's device."""

    @staticmethod
    def forward(ctx, x):
        ctx.device = x.device
        return _cpu_alias(x)

    @staticmethod
    def backward(ctx, grad):
        return _device_alias(grad, ctx.device) if grad.device.type == "cpu" else grad.to(ctx.device)


class _ToDevice(torch.autograd.Function):
    """A device alias of a CPU result; its gradient goes back to the host."""

    @staticmethod
    def forward(ctx, x, device):
        return _device_alias(x, device)

    @staticmethod
    def backward(ctx, grad):
        return (_cpu_alias(grad) if grad.device.type == BACKEND_NAME else grad), None


def _to_host(t):
    if isinstance(t, torch.Tensor) and t.device.type == BACKEND_NAME:
        return _ToHost.apply(t) if t.requires_grad else _cpu_alias(t)
    return t


def _swap_devices(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The graph with every mytorch device constant (``device=`` arguments) made "cpu"."""

    def fix(v):
        if isinstance(v, torch.device) and v.type == BACKEND_NAME:
            return torch.device("cpu")
        if isinstance(v, str) and v.split(":")[0] == BACKEND_NAME:
            return "cpu"
        if isinstance(v, (list, tuple)):
            return type(v)(fix(a) for a in v)
        if isinstance(v, dict):
            return {k: fix(a) for k, a in v.items()}
        return v

    for node in gm.graph.nodes:
        node.args = fix(node.args)
        node.kwargs = fix(node.kwargs)
    gm.recompile()
    return gm


def _on_device(example_inputs) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == BACKEND_NAME
               for t in example_inputs)


def mytorch_backend(gm: torch.fx.GraphModule, example_inputs, **compile_fx_kwargs):
    """The dynamo backend: Inductor on the CPU form of the graph, run over device memory.
    ``compile_fx_kwargs`` (Inductor's config patches, a region name) go to Inductor."""
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import compile_fx

    devices = {t.device for t in example_inputs
               if isinstance(t, torch.Tensor) and t.device.type == BACKEND_NAME}
    if len(devices) > 1:
        raise RuntimeError(f"mytorch torch.compile backend: a graph on several mytorch devices "
                           f"({', '.join(sorted(str(d) for d in devices))}) is not supported; "
                           f"compile one graph per device")
    device = next(iter(devices)) if devices else None
    fake_mode = detect_fake_mode(example_inputs)

    def host_example(t):
        if isinstance(t, torch.Tensor) and t.device.type == BACKEND_NAME:
            if fake_mode is None:
                return _to_host(t)
            with fake_mode:
                r = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="cpu")
            return r.requires_grad_(t.requires_grad)
        return t

    compiled = compile_fx(_swap_devices(gm), [host_example(t) for t in example_inputs],
                          **compile_fx_kwargs)

    def to_device(o):
        if device is None or not isinstance(o, torch.Tensor) or o.device.type != "cpu":
            return o
        if o.is_quantized or o.layout != torch.strided:
            return o.to(device)
        return _ToDevice.apply(o, device) if o.requires_grad else _device_alias(o, device)

    def run(*args):
        outs = compiled(*[_to_host(a) for a in args])
        if isinstance(outs, (list, tuple)):
            return type(outs)(to_device(o) for o in outs)
        return to_device(outs)

    return run


def _interface():
    from torch._dynamo.device_interface import CpuInterface

    class MytorchInterface(CpuInterface):
        """Dynamo's view of the device: host execution, so CPU semantics, with the device's
        own count and current index."""

        @staticmethod
        def is_available() -> bool:
            return torch.mytorch.is_available()

        @staticmethod
        def device_count() -> int:
            return torch.mytorch.device_count()

        @staticmethod
        def current_device() -> int:
            return torch.mytorch.current_device()

        @staticmethod
        def set_device(device) -> None:
            torch.mytorch.set_device(device)

        @staticmethod
        def synchronize(device=None) -> None:
            torch.mytorch.synchronize(device)

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

    return MytorchInterface


_registered = {"done": False}


def register() -> None:
    """Registers the "mytorch" dynamo backend and the dynamo device interface (idempotent)."""
    if _registered["done"]:
        return
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(BACKEND_NAME, _interface())
    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(mytorch_backend, name=BACKEND_NAME)
    _route_default_inductor()
    _registered["done"] = True


def _route_default_inductor() -> None:
    """torch.compile(model) with the default backend: a graph whose inputs are on the mytorch
    device takes the path of mytorch_backend (Inductor all the same, with the same mode and
    options); every other graph goes to Inductor unchanged."""
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None or getattr(wrapper.__call__, "_mytorch_routed", False):
        return
    inductor_call = wrapper.__call__

    def __call__(self, model_, inputs_, *args, **kwargs):
        if not _on_device(inputs_):
            return inductor_call(self, model_, inputs_, *args, **kwargs)
        patches = {**getattr(self, "config", {}), **(kwargs.get("config_patches") or {})}
        return mytorch_backend(model_, inputs_, config_patches=patches)

    __call__._mytorch_routed = True
    wrapper.__call__ = __call__


def register_when_dynamo_loads() -> None:
    """Runs register() right after ``torch._dynamo`` is imported (now, if it already is)."""
    import importlib.abc
    import importlib.util
    import sys

    if "torch._dynamo" in sys.modules and hasattr(sys.modules["torch._dynamo"], "optimize"):
        register()
        return

    class _AfterDynamoImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != "torch._dynamo":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            if spec is None or spec.loader is None:
                return spec
            exec_module = spec.loader.exec_module

            def exec_then_register(module):
                exec_module(module)
                register()

            spec.loader.exec_module = exec_then_register
            return spec

    if not any(type(f).__name__ == "_AfterDynamoImport" for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterDynamoImport())
