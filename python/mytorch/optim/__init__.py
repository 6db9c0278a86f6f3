"""Optimizers (each one fused kernel call per parameter), a learning-rate schedule, clipping."""
from .optimizer import SGD, Adam, AdamW, Optimizer, clip_grad_norm_
from .schedule import CosineWithWarmup, LambdaLR

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm_", "CosineWithWarmup", "LambdaLR"]
