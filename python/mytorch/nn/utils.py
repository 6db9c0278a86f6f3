"""Gradient clipping (also exported as mytorch.optim.clip_grad_norm_)."""
from ..optim.optimizer import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
