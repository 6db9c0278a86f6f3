"""Hardening checks: hypothesis profiles and a hang guard.

`ci` (the default) keeps tests/hardening under five minutes on two cores and draws the
same examples every run; `--hypothesis-profile=long` runs many more, freshly drawn.
"""
import faulthandler
import sys

import pytest
import torch
from hypothesis import HealthCheck, settings

import mytorch_ext  # noqa: F401  registers the ops and the device

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
# ci draws the same examples every run (a red run is reproducible, never a coin toss);
# long draws fresh ones each time, to find what ci does not.
settings.register_profile("ci", max_examples=12, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=400, derandomize=False, **_COMMON)
settings.load_profile("ci")  # pytest's --hypothesis-profile loads its choice after this

# A call that does not return within this many seconds is a hang: the process prints
# every thread's stack and exits, so the run fails loudly instead of stalling.
HANG_SECONDS = 240


@pytest.fixture(autouse=True)
def _hang_guard():
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def _device_state():
    """Every test starts on mytorch:0 with no memory cap, and leaves it that way."""
    if hasattr(torch, "mytorch"):
        torch.mytorch.set_device(0)
    yield
    if hasattr(torch, "mytorch"):
        torch.mytorch.set_device(0)
        for i in range(torch.mytorch.device_count()):
            torch.mytorch.set_memory_limit(0, i)
