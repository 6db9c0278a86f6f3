"""Running ATen ops on the mytorch device in the op-family tests, with a fallback guard."""
import contextlib

import pytest
import torch

import mytorch_ext


def device_or_skip() -> str:
    """'mytorch' when this build has the device, else skip (the kernels are covered on CPU)."""
    if not hasattr(mytorch_ext, "fallback_counts"):
        pytest.skip("this build has no mytorch device")
    if not hasattr(torch, "mytorch"):
        pytest.skip("the mytorch device is not registered in this process (a CUDA GPU is present; "
                    "set MYTORCH_DEVICE=1 to test it)")
    torch.empty(1, device="mytorch")
    return "mytorch"


@contextlib.contextmanager
def no_fallbacks():
    """Asserts that nothing inside ran through the CPU fallback."""
    mytorch_ext.reset_fallback_counts()
    yield
    counts = mytorch_ext.fallback_counts()
    assert not counts, f"ops fell back to the CPU: {counts}"
