"""SGD, Adam and AdamW: one fused kernel call per parameter per step. Gradient clipping."""
from __future__ import annotations

import math

import torch

from .._kernels import K
from ..tensor import Tensor


class Optimizer:
    def __init__(self, params, defaults: dict):
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = []
        for g in groups:
            group = {**defaults, **g, "params": list(g["params"])}
            for p in group["params"]:
                if not isinstance(p, Tensor) or not p.is_leaf:
                    raise ValueError("optimizer can only optimize leaf Tensors")
            self.param_groups.append(group)
        self.state: dict = {}  # param -> its state dict

    def zero_grad(self, set_to_none: bool = True) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def step(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    g = p.grad.data
                    if g.shape != p.data.shape:
                        raise RuntimeError(f"{type(self).__name__}.step: grad of shape "
                                           f"{tuple(g.shape)} for a parameter of shape {p.shape}")
                    state = self.state.get(p)
                    if state is None:
                        state = self.state[p] = self._init_state(p.data, group)
                    self._update(p.data, g.contiguous(), state, group)

    def _init_state(self, p: torch.Tensor, group: dict) -> dict:
        raise NotImplementedError

    def _update(self, p, g, state, group) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict:
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        return {
            "state": {index[id(p)]: {k: Tensor(v) if isinstance(v, torch.Tensor) else v
                                     for k, v in s.items()} for p, s in self.state.items()},
            "param_groups": [{**{k: v for k, v in g.items() if k != "params"},
                              "params": [index[id(p)] for p in g["params"]]}
                             for g in self.param_groups],
        }

    def load_state_dict(self, sd: dict) -> None:
        params = [p for g in self.param_groups for p in g["params"]]
        for g, saved in zip(self.param_groups, sd["param_groups"]):
            g.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in sd["state"].items():
            p = params[int(i)]
            self.state[p] = {k: (v.data.clone().to(p.data.device) if isinstance(v, Tensor) else
                                 v.clone().to(p.data.device) if isinstance(v, torch.Tensor) else v)
                             for k, v in s.items()}


class SGD(Optimizer):
    """p -= lr * (g + wd p), with heavy-ball momentum (optionally Nesterov)."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _init_state(self, p, group):
        if group["momentum"] == 0:
            return {"momentum_buffer": None}
        return {"momentum_buffer": torch.zeros_like(p), "first": True}

    def _update(self, p, g, state, group):
        buf = state["momentum_buffer"]
        K.sgd_step_([p], [g], [] if buf is None else [buf], group["lr"], group["momentum"],
                    group["dampening"], group["weight_decay"], group["nesterov"], False,
                    state.pop("first", False))


class Adam(Optimizer):
    """Adam with bias correction; weight decay added to the gradient (L2), as torch.optim.Adam."""
    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"Invalid beta parameters: {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def _init_state(self, p, group):
        return {"step": torch.zeros((), dtype=torch.float32, device=p.device),
                "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}

    def _update(self, p, g, state, group):
        step = state["step"]
        step.fill_(step.item() + 1)  # the kernel reads the count after this step's increment
        b1, b2 = group["betas"]
        K.adam_step_([p], [g], [state["exp_avg"]], [state["exp_avg_sq"]], [], [step], group["lr"],
                     b1, b2, group["weight_decay"], group["eps"], False, False, self.decoupled)


class AdamW(Adam):
    """Adam with decoupled weight decay: p -= lr * wd * p, as torch.optim.AdamW."""
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0) -> float:
    """Scale all gradients together so that their joint 2-norm is at most max_norm.
    Returns the norm before clipping."""
    if norm_type != 2.0:
        raise NotImplementedError("clip_grad_norm_: only norm_type=2 is supported")
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return 0.0
    total = 0.0
    for p in params:
        g = p.grad.data
        total += float(K.sum(K.mul(g, g), None, False))
    total = math.sqrt(total)
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for p in params:
            g = p.grad.data
            p.grad = Tensor(K.mul(g, torch.full((), scale, dtype=g.dtype, device=g.device)))
    return total
