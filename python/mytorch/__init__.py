"""mytorch: a small deep-learning framework on mytorch's kernels.

Tensor and autograd (mytorch.Tensor, mytorch.autograd), layers (mytorch.nn), functions
(mytorch.functional), optimizers (mytorch.optim), data loading (mytorch.data) and
checkpoints (mytorch.save / mytorch.load). torch tensors serve only as buffers; every
computation is a ``torch.ops.mytorch`` kernel.
"""
from .tensor import (Tensor, bfloat16, bool_, float16, float32, float64, int32, int64)
from . import autograd
from .autograd import enable_grad, is_grad_enabled, no_grad
from . import ops
from .creation import (arange, empty, full, ones, ones_like, rand, randint, randn, randn_like,
                       tensor, zeros, zeros_like)
from .random import manual_seed
from . import functional, nn, optim, data
from .serialization import load, save
from .ops import (abs, exp, log, matmul, maximum, minimum, sigmoid, sqrt, tanh, where)  # noqa: A004

float, long = float32, int64  # noqa: A001  (torch's aliases)

__version__ = "0.1.0"


def cat(tensors, dim: int = 0):
    return ops.cat(tensors, dim)


def stack(tensors, dim: int = 0):
    return ops.stack(tensors, dim)
