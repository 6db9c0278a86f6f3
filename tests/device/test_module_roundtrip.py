"""Module round trip: model.to("mytorch") keeps Parameters, tied weights and grads."""
import torch

import mytorch_ext  # noqa: F401


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight


def test_tied_weights_stay_tied():
    m = Tied()
    w = m.emb.weight
    m.to("mytorch")
    assert m.head.weight is m.emb.weight
    assert m.emb.weight is w  # the same Parameter object, now on the device
    assert w.device == torch.device("mytorch:0")
    assert len(list(m.parameters())) == 1
    m.to("mytorch:1")
    assert m.head.weight is m.emb.weight and w.device.index == 1
    m.cpu()
    assert m.head.weight is m.emb.weight and w.device.type == "cpu"


def test_roundtrip_preserves_values_and_training():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    m.to("mytorch")
    x = torch.randn(16, 3, device="mytorch")
    loss = m(x).pow(2).mean()
    loss.backward()
    assert all(p.grad is not None and p.grad.is_mytorch for p in m.parameters())
    m.cpu()
    for k, v in m.state_dict().items():
        assert torch.equal(v, ref[k])
    assert all(p.grad.device.type == "cpu" for p in m.parameters())


def test_param_data_assignment():
    p = torch.nn.Parameter(torch.ones(3))
    p.data = torch.zeros(3, device="mytorch")
    assert p.is_mytorch and isinstance(p, torch.nn.Parameter)
