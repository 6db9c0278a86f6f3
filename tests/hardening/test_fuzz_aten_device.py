"""ATen ops routed on the mytorch device, fuzzed against ATen on the CPU (aten_specs.py)."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from aten_specs import CASES
from oracle import check_against_reference
from strategies import DEVICE, has_device

pytestmark = pytest.mark.skipif(not has_device(), reason="the mytorch device is not registered")


@pytest.mark.parametrize("key", sorted(CASES))
def test_device_matches_aten_cpu(key):
    spec = CASES[key]
    reached = set()

    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
        args, kwargs = spec.sample(data.draw, dtype)
        reached.update(check_against_reference(spec, args, kwargs, DEVICE))

    run()
    missing = set(spec.covers) - reached
    assert not missing, f"{key}: the fuzzed calls never reached {sorted(missing)} (reached {sorted(reached)})"
