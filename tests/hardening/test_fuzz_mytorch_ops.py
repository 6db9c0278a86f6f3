"""Property-based fuzzing of every mytorch:: op against ATen on the CPU.

Each spec draws shapes (0 and 1 sizes included), layouts (transposed, sliced with a step,
expanded with zero strides), dtypes, broadcasting and dims; the op runs on its CPU kernel
and on the mytorch device, and its gradients (float32/float64) go through its autograd.
"""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from mytorch_specs import SPECS
from oracle import check_against_reference
from strategies import DEVICE, has_device

DEVICES = ["cpu"] + ([DEVICE] if has_device() else [])


@pytest.mark.parametrize("key", sorted(SPECS))
def test_matches_aten(key):
    spec = SPECS[key]
    reached = set()

    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
        args, kwargs = spec.sample(data.draw, dtype)
        for device in DEVICES:
            reached.update(check_against_reference(spec, args, kwargs, device))

    run()
    missing = set(spec.covers) - reached
    assert not missing, f"{key}: the fuzzed calls never reached {sorted(missing)}"


def registered_mytorch_ops():
    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("mytorch::"))


def test_every_registered_op_is_fuzzed():
    covered = {name for spec in SPECS.values() for name in spec.covers}
    missing = [op for op in registered_mytorch_ops() if op not in covered]
    assert not missing, f"mytorch ops with no fuzz spec in mytorch_specs.py: {missing}"
