"""Allocator: 64-byte alignment, per-device statistics, memory really freed, debug poison."""
import gc

import torch

import mytorch_ext  # noqa: F401


def test_alignment_is_64_bytes():
    for n in (1, 3, 17, 1000, 4097):
        t = torch.empty(n, dtype=torch.uint8, device="mytorch")
        assert t.data_ptr() % 64 == 0


def test_allocated_and_peak_per_device():
    gc.collect()
    base0 = torch.mytorch.memory_allocated(0)
    base1 = torch.mytorch.memory_allocated(1)
    torch.mytorch.reset_peak_memory_stats(0)
    a = torch.empty(1000, dtype=torch.float32, device="mytorch:0")
    assert torch.mytorch.memory_allocated(0) == base0 + 4000
    assert torch.mytorch.memory_allocated(1) == base1
    b = torch.empty(250, dtype=torch.float64, device="mytorch:0")
    assert torch.mytorch.max_memory_allocated(0) == base0 + 6000
    del a, b
    assert torch.mytorch.memory_allocated(0) == base0
    assert torch.mytorch.max_memory_allocated(0) == base0 + 6000
    torch.mytorch.reset_peak_memory_stats(0)
    assert torch.mytorch.max_memory_allocated(0) == base0


def test_memory_stats_keys_and_counts():
    before = torch.mytorch.memory_stats(1)
    t = torch.empty(64, device="mytorch:1")
    del t
    after = torch.mytorch.memory_stats(1)
    assert after["allocation.all.allocated"] == before["allocation.all.allocated"] + 1
    assert after["allocation.all.freed"] == before["allocation.all.freed"] + 1
    assert after["allocated_bytes.all.allocated"] == before["allocated_bytes.all.allocated"] + 256
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    for key in ("allocated_bytes.all.peak", "reserved_bytes.all.current", "num_ooms"):
        assert key in after


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_freed_memory_is_returned_to_the_system():
    n = 64 << 20
    gc.collect()
    torch.mytorch.empty_cache()
    rss0 = _rss_bytes()
    t = torch.empty(n, dtype=torch.uint8, device="mytorch")
    t.fill_(1)  # touch every page
    rss1 = _rss_bytes()
    assert rss1 - rss0 > n * 0.9
    del t
    torch.mytorch.empty_cache()
    rss2 = _rss_bytes()
    assert rss1 - rss2 > n * 0.9


def test_debug_mode_poisons_new_and_freed_blocks(run_ok):
    code = """
import ctypes, torch, mytorch_ext
new_poison, freed_poison = mytorch_ext._C._device.poison_bytes()
t = torch.empty(4096, dtype=torch.uint8, device="mytorch")
print(bool((t.cpu() == new_poison).all()))
f = torch.empty(4, device="mytorch")
print(bool(f.isnan().all().item()))
# debug mode holds freed blocks back from reuse, so reading one stays defined
ptr = t.data_ptr()
raw = (ctypes.c_ubyte * 4096).from_address(ptr)
del t
print(all(raw[i] == freed_poison for i in range(4096)))
"""
    out = run_ok(code, MYTORCH_ALLOC_DEBUG=1, MYTORCH_FALLBACK="silent")
    assert out.split() == ["True", "True", "True"]


def test_debug_mode_is_off_by_default():
    assert mytorch_ext._C._device.alloc_debug() is False
