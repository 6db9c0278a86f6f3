"""ATen ops routed on the mytorch device, fuzzed against ATen on the CPU (aten_specs.py)."""
import pytest

from aten_specs import CASES
from oracle import fuzz_against_reference
from strategies import DEVICE, has_device

pytestmark = pytest.mark.skipif(not has_device(), reason="the mytorch device is not registered")


@pytest.mark.parametrize("key", sorted(CASES))
def test_device_matches_aten_cpu(key):
    spec = CASES[key]
    reached = fuzz_against_reference(spec, [DEVICE])
    missing = set(spec.covers) - reached
    assert not missing, f"{key}: the fuzzed calls never reached {sorted(missing)} (reached {sorted(reached)})"
