"""MultiheadAttention and a pre-norm TransformerBlock, on the flash-attention kernel."""
from __future__ import annotations

from .. import functional as F
from .layers import GELU, Dropout, LayerNorm, Linear, Sequential
from .module import Module


class MultiheadAttention(Module):
    """Self-attention over (batch, seq, embed_dim): one fused qkv projection, flash attention,
    an output projection."""

    def __init__(self, embed_dim: int, num_heads: int, causal: bool = False, dropout: float = 0.0,
                 bias: bool = True, dtype=None, device=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} is not divisible by "
                             f"num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.causal, self.dropout = embed_dim, num_heads, causal, dropout
        self.qkv = Linear(embed_dim, 3 * embed_dim, bias, dtype, device)
        self.out = Linear(embed_dim, embed_dim, bias, dtype, device)

    def forward(self, x):
        b, t, c = x.shape
        h = self.num_heads
        qkv = self.qkv(x).reshape(b, t, 3, h, c // h)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        y = F.flash_attn(q, k, v, causal=self.causal,
                         dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.reshape(b, t, c))

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, causal={self.causal}"


class TransformerBlock(Module):
    """x + attn(ln1(x)), then x + mlp(ln2(x)) with a 4x GELU MLP."""

    def __init__(self, dim: int, num_heads: int, causal: bool = True, dropout: float = 0.0,
                 dtype=None, device=None):
        super().__init__()
        self.ln1 = LayerNorm(dim, dtype=dtype, device=device)
        self.attn = MultiheadAttention(dim, num_heads, causal, dropout, dtype=dtype, device=device)
        self.ln2 = LayerNorm(dim, dtype=dtype, device=device)
        self.mlp = Sequential(Linear(dim, 4 * dim, dtype=dtype, device=device), GELU(),
                              Linear(4 * dim, dim, dtype=dtype, device=device), Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
