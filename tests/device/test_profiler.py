"""torch.autograd.profiler.profile(use_device="mytorch"): device times from the mytorch
profiler stubs, non-negative and no larger than the wall time; no PrivateUse1 warnings."""
import time
import warnings

import torch

import mytorch_ext  # noqa: F401

D = "mytorch"


def work():
    a = torch.randn(128, 128, device=D)
    b = a @ a
    return (b.relu() + 1).sum()


def test_legacy_device_profiler_times(capfd):
    work()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "PrivateUse1 used in profiler but not enabled" etc.
        t0 = time.perf_counter()
        with torch.autograd.profiler.profile(use_device=D) as prof:
            work()
        wall_us = (time.perf_counter() - t0) * 1e6
    events = prof.key_averages()
    assert len(events) > 0
    names = {e.key for e in events}
    assert "aten::mm" in names
    for e in events:
        assert 0 <= e.cpu_time_total <= wall_us, (e.key, e.cpu_time_total, wall_us)
        assert e.self_cpu_time_total >= 0, (e.key, e.self_cpu_time_total)
    mm = next(e for e in events if e.key == "aten::mm")
    assert mm.count == 1 and mm.cpu_time_total > 0
    err = capfd.readouterr().err
    assert "not enabled" not in err and "Assert" not in err, err[-2000:]
    table = prof.key_averages().table(sort_by="cpu_time_total")
    assert "aten::mm" in table


def test_kineto_profiler_with_device_activity(capfd):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        work()
    events = prof.key_averages()
    assert any(e.key == "aten::mm" for e in events)
    for e in events:
        assert e.cpu_time_total >= 0
