"""Training runs natively on the mytorch device: no CPU fallback, same loss curve as CPU.

Each model trains for 20 steps on `mytorch` and on `cpu` from the same initial
weights and data; every aten op must hit a native mytorch kernel
(mytorch_ext.fallback_counts() stays empty) and the two loss curves must agree
within float32 tolerance.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import mytorch_ext

STEPS = 20

pytestmark = pytest.mark.skipif(
    not hasattr(mytorch_ext, "fallback_counts") or not hasattr(torch, "mytorch"),
    reason="this build has no mytorch device")


def train(make_model, make_batch, loss_fn, device, lr=3e-3):
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x, y = (t.to(device) for t in make_batch(gen))
        loss = loss_fn(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def compare(make_model, make_batch, loss_fn, rtol=2e-4, atol=2e-5):
    ref = train(make_model, make_batch, loss_fn, "cpu")
    mytorch_ext.reset_fallback_counts()
    got = train(make_model, make_batch, loss_fn, "mytorch")
    fallbacks = {k: v for k, v in mytorch_ext.fallback_counts().items() if v}
    assert fallbacks == {}, f"ops that ran through the CPU fallback: {fallbacks}"
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=rtol, atol=atol)
    assert ref[-1] < ref[0]  # it does train
    return got


# ---- MLP ----
def test_mlp():
    def model():
        return nn.Sequential(nn.Linear(13, 64), nn.GELU(), nn.Linear(64, 32), nn.ReLU(),
                             nn.Linear(32, 5))

    def batch(gen):
        x = torch.randn(16, 13, generator=gen)
        return x, (x[:, :5].argmax(1) + (x[:, 5] > 0).long()) % 5

    compare(model, batch, lambda m, x, y: F.cross_entropy(m(x), y))


def test_mlp_regression_mse():
    def model():
        return nn.Sequential(nn.Linear(7, 33), nn.Tanh(), nn.Linear(33, 3))

    def batch(gen):
        x = torch.randn(32, 7, generator=gen)
        return x, torch.stack([x[:, 0] * x[:, 1], x[:, 2].sin(), x[:, 3:].sum(1)], 1)

    compare(model, batch, lambda m, x, y: F.mse_loss(m(x), y))


# ---- GPT-style transformer ----
VOCAB, CTX = 61, 12


class TinyGPT(nn.Module):
    def __init__(self, d=32, heads=4, layers=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(CTX, d)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB)

    def forward(self, idx):
        T = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x, src_mask=mask, is_causal=True)
        return self.head(self.ln(x))


def _lm_batch(gen):
    start = torch.randint(0, VOCAB, (4, 1), generator=gen)
    seq = (start + torch.arange(CTX + 1) * 3) % VOCAB  # learnable: next = prev + 3
    return seq[:, :-1], seq[:, 1:]


def test_gpt_transformer():
    def loss(m, x, y):
        return F.cross_entropy(m(x).reshape(-1, VOCAB), y.reshape(-1))

    compare(TinyGPT, _lm_batch, loss)


# ---- Hugging Face Llama ----
def test_llama_for_causal_lm():
    transformers = pytest.importorskip("transformers")

    def model():
        cfg = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            attn_implementation="eager")
        return transformers.LlamaForCausalLM(cfg)

    def loss(m, x, y):
        return m(input_ids=x, labels=x).loss

    compare(model, _lm_batch, loss)
