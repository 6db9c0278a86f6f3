"""Layers and the Module tree (as torch.nn)."""
from . import utils
from .attention import MultiheadAttention, TransformerBlock
from .layers import (GELU, AvgPool2d, BatchNorm2d, Conv2d, Dropout, Embedding, Flatten, LayerNorm,
                     Linear, MaxPool2d, ModuleList, ReLU, RMSNorm, Sequential, SiLU, Tanh)
from .module import Module, Parameter

__all__ = ["Module", "Parameter", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm2d",
           "ReLU", "GELU", "SiLU", "Tanh", "LayerNorm", "RMSNorm", "Embedding", "Dropout",
           "Flatten", "Sequential", "ModuleList", "MultiheadAttention", "TransformerBlock", "utils"]
