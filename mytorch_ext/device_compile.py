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
ways, zero-copy too (see mytorch_backend).

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


def _device_index(v) -> int | None:
    """The mytorch device index of a tensor or fake tensor (-1: the current device), or
    None when it is not a mytorch tensor."""
    if isinstance(v, torch.Tensor) and v.device.type == BACKEND_NAME:
        return v.device.index if v.device.index is not None else -1
    return None


def _output_devices(gm: torch.fx.GraphModule) -> list:
    """The mytorch device index (or None) of each output of a dynamo graph, from the
    example values dynamo recorded."""
    import torch.utils._pytree as pytree

    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return [_device_index(n.meta.get("example_value", n.meta.get("val")))
            if isinstance(n, torch.fx.Node) else None
            for n in pytree.tree_leaves(out.args[0])]


def _aliasing(compiled, out_devices: list):
    """Inductor's compiled CPU function (boxed calling convention) made to take device
    tensors: device arguments become CPU aliases, and output i becomes a device alias on
    mytorch:out_devices[i] (-1: the current device; None, or past the list: left on the
    host). Both in one C++ call each (``host_args``, ``device_results``)."""
    inner = compiled.current_callable
    devices = [-2 if d is None else d for d in out_devices]
    host_args, device_results = _C._device.host_args, _C._device.device_results

    def call(args):
        host = host_args(args)
        args.clear()
        outs = inner(host)
        return device_results(outs, devices) if devices else outs

    call._boxed_call = True
    compiled.current_callable = call
    return compiled


def _alias_attributes(gm: torch.fx.GraphModule) -> list:
    """Replaces the device tensors gm holds as parameters and buffers (dynamo keeps an
    optimizer's parameters and state this way) by CPU aliases, the same alias for the same
    tensor. Returns the device index (or None) of each, in the order AOTAutograd lifts them
    into graph inputs: parameters, then buffers."""
    aliases: dict = {}

    def alias(t):
        if id(t) not in aliases:
            a = _cpu_alias(t.detach())
            aliases[id(t)] = (torch.nn.Parameter(a, requires_grad=t.requires_grad)
                              if isinstance(t, torch.nn.Parameter) else a)
        return aliases[id(t)]

    def replace(name, table):
        *path, last = name.split(".")
        owner = gm
        for part in path:
            owner = getattr(owner, part)
        getattr(owner, table)[last] = alias(getattr(owner, table)[last])

    lifted = {}
    for table, items in (("_parameters", gm.named_parameters(remove_duplicate=False)),
                         ("_buffers", gm.named_buffers(remove_duplicate=False))):
        for name, t in list(items):
            lifted[name] = _device_index(t)
            if lifted[name] is not None:
                replace(name, table)
    return list(lifted.values())


def _pointwise(n: torch.fx.Node) -> bool:
    return (n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and torch.Tag.pointwise in n.target.tags)


def _store_reused_erf(graph: torch.fx.Graph) -> None:
    """Marks each erf result that more than one op reads (after the pointwise ops that only
    it feeds: GELU's ``0.5 * x * (1 + erf(x / sqrt(2)))``), or that a variance reads, to be
    stored in a buffer when Inductor lowers the graph (``inductor_realize_to_strides``).

    Inductor otherwise inlines a pointwise value into every reader and recomputes it there.
    For the CPU it stores a reused value that computes exp, log, sigmoid or tanh, but erf is
    not in that list, so GELU followed by LayerNorm computes the erf three times per element
    (the mean pass, the variance pass and the normalizing pass): ``F.layer_norm(F.gelu(h))``
    compiled on the device, 256x512, one thread: 257 us recomputing, 114 us stored."""
    aten = torch.ops.aten
    two_pass = (aten.var_mean.correction, aten.var.correction)

    for node in graph.nodes:
        if node.op != "call_function" or node.target is not aten.erf.default:
            continue
        end = node
        while len(end.users) == 1 and _pointwise(next(iter(end.users))):
            end = next(iter(end.users))
        if len(end.users) > 1 or any(u.target in two_pass for u in end.users):
            end.meta["inductor_realize_to_strides"] = True


def _unfuse_bias_into_pointwise(graph: torch.fx.Graph) -> None:
    """addmm(bias, a, b) whose readers are all pointwise becomes mm(a, b) + bias, so that the
    bias add runs inside the readers' fused kernel instead of as a copy of the bias into
    the matmul's output before the matmul (Inductor does this for GPUs only). The benchmark
    MLP's inference (its first Linear, 256 -> 512 on 256 rows, is read by GELU): 0.583 ->
    0.568 ms on 1 thread, 0.870 -> 0.767 ms on 2."""
    aten = torch.ops.aten

    for node in list(graph.nodes):
        if (node.op != "call_function" or node.target is not aten.addmm.default
                or node.kwargs or len(node.args) != 3
                or not isinstance(node.args[0], torch.fx.Node)):
            continue
        bias, a, b = node.args
        val, bval = node.meta.get("val"), bias.meta.get("val")
        if (val is None or bval is None or bval.dim() != 1 or bval.dtype != val.dtype
                or not node.users or not all(_pointwise(u) for u in node.users)):
            continue
        with graph.inserting_before(node):
            mm = graph.call_function(aten.mm.default, (a, b))
            add = graph.call_function(aten.add.Tensor, (mm, bias))
        mm.meta, add.meta = dict(node.meta), dict(node.meta)
        node.replace_all_uses_with(add)
        graph.erase_node(node)


def _post_grad_pass():
    """_unfuse_bias_into_pointwise then _store_reused_erf, as an Inductor custom graph pass
    (its uuid keys Inductor's cache)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

    class MytorchPostGradPass(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            _unfuse_bias_into_pointwise(graph)
            _store_reused_erf(graph)

        def uuid(self):
            return get_hash_for_files((__file__,), "mytorch-post-grad-pass")

    return MytorchPostGradPass()


def _with_post_grad_pass(compile_inner):
    """compile_inner (Inductor's compile_fx_inner) with the backend's post-grad pass run
    after the post-grad passes already configured."""
    from torch._inductor import config

    def compile_with_pass(*args, **kwargs):
        configured = config.post_grad_custom_post_pass
        passes = (tuple(configured) if isinstance(configured, (list, tuple))
                  else () if configured is None else (configured,))
        with config.patch(post_grad_custom_post_pass=(*passes, _post_grad_pass())):
            return compile_inner(*args, **kwargs)

    return compile_with_pass


def mytorch_backend(gm: torch.fx.GraphModule, example_inputs, **compile_fx_kwargs):
    """The dynamo backend: Inductor on the CPU form of the graph, run over device memory.
    ``compile_fx_kwargs`` (Inductor's config patches, a region name) go to Inductor.

    AOTAutograd traces the graph with CPU fake tensors and Inductor compiles its forward
    and backward graphs for the CPU; each compiled function is then wrapped (``_aliasing``)
    to take device tensors and give device results, so the autograd node AOTAutograd
    builds sees device tensors on both sides: no per-tensor autograd function, and the
    whole backward runs on the device's autograd thread."""
    from torch._guards import TracingContext, detect_fake_mode
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    tensors = [t for t in [*gm.parameters(), *gm.buffers(), *example_inputs]
               if isinstance(t, torch.Tensor) and t.device.type == BACKEND_NAME]
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(f"mytorch torch.compile backend: a graph on several mytorch devices "
                           f"({', '.join(sorted(str(d) for d in devices))}) is not supported; "
                           f"compile one graph per device")
    user_out_devices = _output_devices(gm)
    n_lifted = sum(1 for _ in gm.named_parameters(remove_duplicate=False))
    n_lifted += sum(1 for _ in gm.named_buffers(remove_duplicate=False))
    # the device of each input of AOTAutograd's graphs: gm's parameters and buffers, then
    # the graph's inputs
    in_devices = _alias_attributes(gm) + [_device_index(t) for t in example_inputs]
    fake_mode = detect_fake_mode(example_inputs)

    def host_example(t):
        if isinstance(t, torch.Tensor) and t.device.type == BACKEND_NAME:
            if fake_mode is None:
                return _cpu_alias(t.detach()).requires_grad_(t.requires_grad)
            with fake_mode:
                r = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="cpu")
            return r.requires_grad_(t.requires_grad)
        return t

    def inner_compile(fx_graph, inner_inputs, **kwargs):
        compiled = _with_post_grad_pass(compile_fx_inner)(fx_graph, inner_inputs, **kwargs)
        if kwargs.get("is_backward"):
            # one gradient per forward input, on that input's device
            outs = [n for n in fx_graph.graph.nodes if n.op == "output"][0].args[0]
            if len(outs) != len(in_devices):
                raise RuntimeError(
                    f"mytorch torch.compile backend: the backward graph has {len(outs)} "
                    f"outputs for {len(in_devices)} inputs; cannot place its gradients")
            if any(o is not None and in_devices[i] is not None
                   for i, o in enumerate(outs[:n_lifted])):
                raise RuntimeError(
                    "mytorch torch.compile backend: a device parameter that the graph holds "
                    "as an attribute (not an input) receives a gradient; this is not "
                    "supported (dynamo passes module parameters as inputs unless "
                    "torch._dynamo.config.inline_inbuilt_nn_modules is off)")
            out_devices = in_devices
        else:
            # forward outputs: mutated inputs, the graph's outputs, intermediate bases,
            # then what is saved for the backward (which stays on the host)
            ctx = TracingContext.try_get()
            meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
            if meta is None:
                out_devices = list(user_out_devices)
            else:
                device = next(iter(devices)).index if devices else None
                device = -1 if devices and device is None else device
                out_devices = ([in_devices[i] for i in meta.mutated_inp_runtime_indices]
                               + list(user_out_devices)
                               + [device] * meta.num_intermediate_bases)
        return _aliasing(compiled, out_devices)

    from torch._functorch import config as functorch_config

    # AOTAutograd's cache would hand back compiled functions without the aliasing wrapper
    with functorch_config.patch(enable_autograd_cache=False):
        return compile_fx(_swap_devices(gm), [host_example(t) for t in example_inputs],
                          inner_compile=inner_compile, **compile_fx_kwargs)



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
    from ._after_import import after_import

    after_import("torch._dynamo", register, ready=lambda m: hasattr(m, "optimize"))
