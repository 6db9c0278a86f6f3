"""Every patching test starts and ends with nothing patched: tests share worker processes
(pytest-xdist), and a test that fails between apply_to() and revert() (or patch() and
unpatch()) must not leave its swaps, among them module globals such as a modeling module's
apply_rotary_pos_emb, to the tests that run after it."""
import pytest

import mytorch_ext
from mytorch_ext.patching import hf


def _restore():
    try:
        hf.revert_all()  # every live apply_to handle, every swapped apply_rotary_pos_emb
    finally:
        mytorch_ext.unpatch()
        mytorch_ext.patch_stats(reset=True)


@pytest.fixture(autouse=True)
def _isolated():
    _restore()  # also what tests elsewhere in this process may have left
    yield
    _restore()
