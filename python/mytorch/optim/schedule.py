"""Learning-rate schedules: lr = base_lr * factor(step), set on every param group."""
from __future__ import annotations

import math


class LambdaLR:
    """lr of each group = its initial lr * fn(step); call step() after each optimizer step."""

    def __init__(self, optimizer, fn):
        self.optimizer, self.fn, self.last_step = optimizer, fn, 0
        self.base_lrs = [g.setdefault("initial_lr", g["lr"]) for g in optimizer.param_groups]
        self._apply()

    def _apply(self):
        for g, base in zip(self.optimizer.param_groups, self.base_lrs):
            g["lr"] = base * self.fn(self.last_step)

    def step(self):
        self.last_step += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {"last_step": self.last_step, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state):
        self.last_step, self.base_lrs = state["last_step"], list(state["base_lrs"])
        self._apply()


class CosineWithWarmup(LambdaLR):
    """Linear warm-up from 0 over warmup_steps, then a cosine decay to min_ratio * lr at
    total_steps (held there afterwards)."""

    def __init__(self, optimizer, warmup_steps: int, total_steps: int, min_ratio: float = 0.0):
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"CosineWithWarmup: expected 0 <= warmup_steps <= total_steps, "
                             f"got {warmup_steps} and {total_steps}")
        self.warmup_steps, self.total_steps, self.min_ratio = warmup_steps, total_steps, min_ratio
        super().__init__(optimizer, self.factor)

    def factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
