"""Property-based fuzzing of every mytorch:: op against ATen on the CPU.

Each entry of tests/opinfo.py draws shapes (0 and 1 sizes included), layouts (transposed,
sliced with a step, expanded with zero strides), dtypes, broadcasting and dims; the op runs on
its CPU kernel and on the mytorch device, and its gradients (float32/float64) go through its
autograd, which must reach the entry's backward ops.
"""
import pytest

from opinfo import fuzz_cases, registered_ops
from oracle import fuzz_against_reference
from strategies import DEVICE, has_device

DEVICES = ["cpu"] + ([DEVICE] if has_device() else [])
CASES = fuzz_cases()


@pytest.mark.parametrize("key", sorted(CASES))
def test_matches_aten(key):
    spec = CASES[key]
    reached = fuzz_against_reference(spec, DEVICES)
    missing = set(spec.covers) - reached
    assert not missing, f"{key}: the fuzzed calls never reached {sorted(missing)}"


def test_every_registered_op_is_fuzzed():
    covered = {name for spec in CASES.values() for name in spec.covers}
    missing = [f"mytorch::{op}" for op in registered_ops() if f"mytorch::{op}" not in covered]
    assert not missing, (f"mytorch ops with no fuzzed call in tests/opinfo.py (give the entry a `sample`, or "
                         f"for a backward op, `backward_of`): {missing}")
