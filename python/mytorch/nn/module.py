"""Module: a tree of layers that owns Parameters, like torch.nn.Module."""
from __future__ import annotations

from collections import OrderedDict

from ..tensor import Tensor


class Parameter(Tensor):
    """A Tensor that a Module registers as one of its parameters (requires grad by default)."""
    __slots__ = ()

    def __init__(self, data, requires_grad: bool = True):
        super().__init__(data.data if isinstance(data, Tensor) else data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    training = True

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() call")
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor: Tensor | None) -> None:
        """State that is saved and moved with the module but is not a parameter."""
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- the tree ----
    def children(self):
        return iter(self._modules.values())

    def named_children(self):
        return iter(self._modules.items())

    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_parameters(self, prefix: str = ""):
        seen = set()
        for mname, m in self.named_modules(prefix):
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mname}.{name}" if mname else name), p

    def parameters(self):
        return (p for _, p in self.named_parameters())

    def named_buffers(self):
        for mname, m in self.named_modules():
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mname}.{name}" if mname else name), b

    def buffers(self):
        return (b for _, b in self.named_buffers())

    # ---- modes and placement ----
    def train(self, mode: bool = True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def to(self, device=None, dtype=None):
        """Move (and for floating tensors, cast) every parameter and buffer in place."""
        for m in self.modules():
            for store in (m._parameters, m._buffers):
                for t in store.values():
                    if t is not None:
                        cast = dtype if dtype is not None and t.dtype.is_floating_point else None
                        t.data = t.data.to(device=device, dtype=cast)
                        if t.grad is not None:
                            t.grad = t.grad.to(device=device, dtype=cast)
        return self

    # ---- checkpoints ----
    def state_dict(self) -> OrderedDict:
        out = OrderedDict()
        for mname, m in self.named_modules():
            pre = f"{mname}." if mname else ""
            for name, p in m._parameters.items():
                if p is not None:
                    out[pre + name] = p.detach()
            for name, b in m._buffers.items():
                if b is not None:
                    out[pre + name] = b.detach()
        return out

    def load_state_dict(self, state: dict, strict: bool = True):
        own = {}
        for mname, m in self.named_modules():
            pre = f"{mname}." if mname else ""
            for store in (m._parameters, m._buffers):
                for name, t in store.items():
                    if t is not None:
                        own[pre + name] = t
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
        for k, t in own.items():
            if k in state:
                src = state[k]
                src = src.data if isinstance(src, Tensor) else src
                if tuple(src.shape) != t.shape:
                    raise RuntimeError(
                        f"Error(s) in loading state_dict for {type(self).__name__}: size mismatch "
                        f"for {k}: copying a param with shape {tuple(src.shape)} from checkpoint, "
                        f"the shape in current model is {t.shape}.")
                t.data.copy_(src)
        return missing, unexpected

    # ---- printing ----
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"
