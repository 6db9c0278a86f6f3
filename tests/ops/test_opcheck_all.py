"""Every registered mytorch:: op passes torch.library.opcheck on its fixed samples.

The samples are the `samples` of the op's entry in tests/opinfo.py. The coverage test reads
the registered op list, so an op added without an entry fails it; an entry whose op is not
registered fails it too. An entry without samples names the reason (`no_opcheck`).
"""
import pytest
import torch

from opinfo import OPS, registered_ops

M = torch.ops.mytorch
OPCHECKED = sorted(n for n, e in OPS.items() if e.samples is not None)


def test_every_registered_op_has_an_entry():
    ops = set(registered_ops())
    assert len(ops) > 100  # the registry was read
    missing = sorted(ops - OPS.keys())
    assert not missing, f"mytorch:: ops with no entry in tests/opinfo.py: {missing}"
    stale = sorted(OPS.keys() - ops)
    assert not stale, f"tests/opinfo.py entries for ops that are not registered: {stale}"
    unsampled = sorted(n for n, e in OPS.items() if e.samples is None and not e.no_opcheck)
    assert not unsampled, f"entries with no opcheck samples and no reason (no_opcheck): {unsampled}"
    both = sorted(n for n, e in OPS.items() if e.samples is not None and e.no_opcheck)
    assert not both, f"entries both sampled and exempted from opcheck: {both}"


@pytest.mark.parametrize("name", OPCHECKED)
def test_opcheck(name):
    op = getattr(M, name).default
    samples = OPS[name].samples()
    assert samples
    utils = OPS[name].opcheck_utils
    for args, kwargs in samples:
        if utils is None:
            torch.library.opcheck(op, args, kwargs)
        else:
            torch.library.opcheck(op, args, kwargs, test_utils=utils)
