"""Naming and generated methods: the PrivateUse1 backend is called `mytorch`."""
import torch

import mytorch_ext  # noqa: F401


def test_backend_is_renamed():
    assert torch._C._get_privateuse1_backend_name() == "mytorch"
    assert torch.device("mytorch").type == "mytorch"
    d = torch.device("mytorch:1")
    assert (d.type, d.index) == ("mytorch", 1)


def test_tensor_methods():
    x = torch.arange(6.0)
    y = x.mytorch()
    assert y.is_mytorch and not x.is_mytorch
    assert y.device == torch.device("mytorch:0")
    assert x.mytorch(1).device == torch.device("mytorch:1")
    assert torch.equal(y.cpu(), x)


def test_module_methods():
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    assert m.mytorch() is m
    assert all(p.is_mytorch for p in m.parameters())
    m.mytorch(1)
    assert {p.device for p in m.parameters()} == {torch.device("mytorch:1")}


def test_storage_methods():
    s = torch.arange(4, dtype=torch.float32).untyped_storage()
    ds = s.mytorch()
    assert ds.is_mytorch and ds.device.type == "mytorch"
    assert bytes(ds.cpu()) == bytes(s)


def test_factories_take_the_device():
    for make in (lambda d: torch.empty(2, 3, device=d), lambda d: torch.zeros(2, 3, device=d),
                 lambda d: torch.ones(2, 3, device=d), lambda d: torch.full((2, 3), 7.0, device=d)):
        assert make("mytorch:1").device == torch.device("mytorch:1")
        assert make("mytorch").device == torch.device("mytorch:0")
