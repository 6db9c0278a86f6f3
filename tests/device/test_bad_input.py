"""Bad input: unknown device index, out of memory, stale views after del."""
import gc

import pytest
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401


class TestUnknownIndex(TestCase):
    def test_factory_on_unknown_index(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.empty(3, device="mytorch:7")
        self.assertExpectedInline(str(cm.exception).split("\n")[0], """mytorch: invalid device index 7; there are 2 mytorch devices (mytorch:0 to mytorch:1; set MYTORCH_DEVICE_COUNT to change the count)""")

    def test_to_unknown_index(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.ones(2).to("mytorch:2")
        self.assertIn("invalid device index 2", str(cm.exception))
        with self.assertRaises(RuntimeError):
            torch.mytorch.set_device(9)
        with self.assertRaises(RuntimeError):
            torch.mytorch.memory_allocated(4)
        self.assertEqual(torch.mytorch.current_device(), 0)


class TestOutOfMemory(TestCase):
    def test_limit_raises_out_of_memory_error(self):
        gc.collect()
        in_use = torch.mytorch.memory_allocated(1)
        torch.mytorch.set_memory_limit(in_use + (1 << 20), device=1)
        ooms = torch.mytorch.memory_stats(1)["num_ooms"]
        keep = torch.empty(1 << 18, device="mytorch:1")  # 1 MiB: fits exactly
        with self.assertRaises(torch.OutOfMemoryError) as cm:
            torch.empty(1, device="mytorch:1")
        self.assertRegex(str(cm.exception), r"^mytorch: out of memory on mytorch:1: tried to allocate 4 bytes; \d+ bytes in use, limit \d+ bytes \(MYTORCH_MEMORY_LIMIT\)")
        self.assertEqual(torch.mytorch.memory_stats(1)["num_ooms"], ooms + 1)
        self.assertTrue(torch.empty(1, device="mytorch:0").is_mytorch)  # other device unaffected
        del keep
        torch.empty(1, device="mytorch:1")  # room again: the process went on
        torch.mytorch.set_memory_limit(0, device=1)

    def test_out_of_memory_is_catchable_like_cuda(self):
        torch.mytorch.set_memory_limit(1 << 16)
        try:
            with self.assertRaises(torch.cuda.OutOfMemoryError):  # the same class
                torch.ones(1 << 16, device="mytorch")
        finally:
            torch.mytorch.set_memory_limit(0)


def test_memory_limit_from_env(run_ok):
    code = """
import torch, mytorch_ext
torch.empty(100, dtype=torch.uint8, device="mytorch")
try:
    torch.empty(5000, dtype=torch.uint8, device="mytorch:1")
except torch.OutOfMemoryError as e:
    print("OOM", str(e).split(";")[0])
print("alive")
"""
    out = run_ok(code, MYTORCH_MEMORY_LIMIT=4096)
    assert out.splitlines() == [
        "OOM mytorch: out of memory on mytorch:1: tried to allocate 5000 bytes", "alive"]


def test_bad_memory_limit_env(run):
    r = run("import torch, mytorch_ext; torch.empty(1, device='mytorch')", MYTORCH_MEMORY_LIMIT="lots")
    assert r.returncode != 0 and "MYTORCH_MEMORY_LIMIT must be a number of bytes" in r.stderr


def test_stale_view_keeps_its_memory_alive():
    gc.collect()
    base_bytes = torch.mytorch.memory_allocated()
    base = torch.arange(1000, dtype=torch.float32, device="mytorch")
    view = base[100:110]
    expected = torch.arange(100, 110, dtype=torch.float32)
    del base
    gc.collect()
    # the storage is reference-counted: the view still owns all 4000 bytes
    assert torch.mytorch.memory_allocated() == base_bytes + 4000
    junk = [torch.full((1000,), -1.0, device="mytorch") for _ in range(8)]  # reuse freed blocks
    assert torch.equal(view.cpu(), expected)
    del view, junk
    gc.collect()
    assert torch.mytorch.memory_allocated() == base_bytes


def test_negative_memory_limit():
    with pytest.raises(RuntimeError, match="memory limit must be >= 0 bytes"):
        torch.mytorch.set_memory_limit(-1)
