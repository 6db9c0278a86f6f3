"""pin_memory() of CPU tensors with mytorch as the current accelerator: the device's
pinned host allocator serves it, is_pinned() tells its blocks, and
DataLoader(pin_memory=True) works in a program that imports mytorch_ext."""
import torch
from torch.utils.data import DataLoader, TensorDataset

import mytorch_ext  # noqa: F401

D = "mytorch"


def test_accelerator_is_mytorch():
    assert torch.accelerator.current_accelerator().type == D


def test_pin_memory_copies_into_pinned_memory():
    x = torch.randn(7, 5)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.device.type == "cpu" and p.is_pinned()
    assert p.data_ptr() != x.data_ptr() and torch.equal(p, x)
    assert p[2:].is_pinned()  # a view into a pinned block
    assert p.pin_memory() is p or p.pin_memory().data_ptr() == p.data_ptr()


def test_pinned_empty_and_storage():
    e = torch.empty(0).pin_memory()
    assert e.numel() == 0
    t = torch.empty(3, 4, pin_memory=True)
    assert t.is_pinned()
    s = torch.arange(6.0).untyped_storage().pin_memory()
    assert s.is_pinned()


def test_pinned_to_device_roundtrip():
    p = torch.arange(12.0).view(3, 4).pin_memory()
    d = p.to(D, non_blocking=True)
    assert d.device.type == D and torch.equal(d.cpu(), p)


def test_dataloader_pin_memory():
    ds = TensorDataset(torch.arange(40.0).view(20, 2), torch.arange(20))
    loader = DataLoader(ds, batch_size=6, pin_memory=True)
    seen = []
    for xb, yb in loader:
        assert xb.is_pinned() and yb.is_pinned()
        seen.append(yb)
        torch.testing.assert_close(xb.to(D).sum().cpu(), xb.sum())
    assert torch.equal(torch.cat(seen), torch.arange(20))


def test_dataloader_pin_memory_with_workers(run_ok):
    """Worker processes (spawned) load; the main process's pin thread pins."""
    code = (
        "import torch, mytorch_ext\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.arange(16.0).view(8, 2))\n"
        "if __name__ == '__main__':\n"
        "    dl = DataLoader(ds, batch_size=4, pin_memory=True, num_workers=2,\n"
        "                    multiprocessing_context='spawn')\n"
        "    out = [b[0] for b in dl]\n"
        "    assert all(b.is_pinned() for b in out)\n"
        "    print(float(torch.cat(out).sum()))\n")
    out = run_ok(code)
    assert out.split() == ["120.0"]
