"""Module API, layers against torch.nn, checkpoints torch can read."""
import pytest
import torch
from expecttest import assert_expected_inline

import mytorch
import mytorch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 10))

    def forward(self, x):
        return self.head(nn.MaxPool2d(2)(self.bn(self.conv(x)).relu()))


def test_module_tree_and_state_dict():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "head.1.weight",
                     "head.1.bias"]
    assert [n for n, _ in m.named_children()] == ["conv", "bn", "head"]
    assert list(m.state_dict()) == names[:4] + ["bn.running_mean", "bn.running_var",
                                                   "bn.num_batches_tracked"] + names[4:]
    m.eval()
    assert not m.bn.training and not m.head[1].training
    m.train()
    assert m.bn.training
    assert_expected_inline(repr(m), """\
Net(
  (conv): Conv2d(1, 4, kernel_size=(3, 3), stride=1, padding=1)
  (bn): BatchNorm2d(4, eps=1e-05, momentum=0.1)
  (head): Sequential(
    (0): Flatten()
    (1): Linear(in_features=64, out_features=10, bias=True)
  )
)""")


def test_save_load_roundtrip_and_torch_reads_it(tmp_path):
    m = Net()
    path = tmp_path / "ckpt.pt"
    mytorch.save(m.state_dict(), path)
    raw = torch.load(path, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in raw.values())
    torch.testing.assert_close(raw["conv.weight"], m.conv.weight.data)
    m2 = Net()
    m2.load_state_dict(mytorch.load(path))
    for (n, p), (_, q) in zip(m.named_parameters(), m2.named_parameters()):
        torch.testing.assert_close(p.data, q.data, msg=n)
    with pytest.raises(RuntimeError, match="size mismatch for conv.weight"):
        bad = dict(raw)
        bad["conv.weight"] = torch.zeros(2, 2)
        m2.load_state_dict(bad)


def test_torch_model_state_dict_loads_into_mytorch():
    tm = torch.nn.Linear(5, 3)
    mm = nn.Linear(5, 3)
    mm.load_state_dict(tm.state_dict())
    x = torch.randn(4, 5)
    torch.testing.assert_close(mm(mytorch.tensor(x)).data, tm(x).detach())


def test_layers_match_torch_forward_and_backward():
    torch.manual_seed(0)
    pairs = [
        (torch.nn.Linear(6, 5), nn.Linear(6, 5), (3, 6)),
        (torch.nn.Conv2d(2, 3, 3, stride=2, padding=1), nn.Conv2d(2, 3, 3, stride=2, padding=1),
         (2, 2, 7, 7)),
        (torch.nn.LayerNorm(6), nn.LayerNorm(6), (2, 4, 6)),
        (torch.nn.RMSNorm(6, eps=1e-6), nn.RMSNorm(6, eps=1e-6), (2, 4, 6)),
        (torch.nn.BatchNorm2d(3), nn.BatchNorm2d(3), (4, 3, 5, 5)),
    ]
    for tm, mm, shape in pairs:
        mm.load_state_dict(tm.state_dict())
        x = torch.randn(shape)
        tx, mx = x.clone().requires_grad_(), mytorch.tensor(x, requires_grad=True)
        ty, my = tm(tx), mm(mx)
        torch.testing.assert_close(my.data, ty.detach(), rtol=1e-4, atol=1e-5)
        ty.square().sum().backward()
        (my * my).sum().backward()
        torch.testing.assert_close(mx.grad.data, tx.grad, rtol=1e-4, atol=1e-5)
        for (n, tp), (_, mp) in zip(tm.named_parameters(), mm.named_parameters()):
            torch.testing.assert_close(mp.grad.data, tp.grad, rtol=1e-4, atol=1e-5, msg=n)


def test_transformer_block_matches_torch_math():
    mytorch.manual_seed(0)
    blk = nn.TransformerBlock(16, 2, causal=True)
    x = mytorch.randn(2, 7, 16, requires_grad=True)
    y = blk(x)
    # the same block written with torch ops
    p = {k: v.data.clone().requires_grad_() for k, v in blk.state_dict().items()}
    tx = x.data.clone().requires_grad_()
    F = torch.nn.functional
    h = F.layer_norm(tx, (16,), p["ln1.weight"], p["ln1.bias"])
    qkv = F.linear(h, p["attn.qkv.weight"], p["attn.qkv.bias"]).reshape(2, 7, 3, 2, 8)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 7, 16)
    t = tx + F.linear(a, p["attn.out.weight"], p["attn.out.bias"])
    m = F.linear(F.gelu(F.linear(F.layer_norm(t, (16,), p["ln2.weight"], p["ln2.bias"]),
                                 p["mlp.0.weight"], p["mlp.0.bias"])),
                 p["mlp.2.weight"], p["mlp.2.bias"])
    ty = t + m
    torch.testing.assert_close(y.data, ty.detach(), rtol=1e-4, atol=1e-5)
    ty.sum().backward()
    y.sum().backward()
    torch.testing.assert_close(x.grad.data, tx.grad, rtol=1e-4, atol=1e-4)
    for n, mp in blk.named_parameters():
        torch.testing.assert_close(mp.grad.data, p[n].grad, rtol=1e-4, atol=1e-4, msg=n)


def test_module_to_dtype_and_embedding_dropout_modes():
    m = nn.Sequential(nn.Embedding(10, 4), nn.Dropout(0.5))
    m.to(dtype=mytorch.float64)
    assert m[0].weight.dtype == torch.float64
    m.eval()
    idx = mytorch.tensor([[1, 2], [3, 4]])
    torch.testing.assert_close(m(idx).data, m[0].weight.data[idx.data])
