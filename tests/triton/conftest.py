import pytest

from fa_ref import GPU, TEST_NS, setup_ops
from mytorch_ext.ops import attention


@pytest.fixture(autouse=True)
def _wrappers_call_the_test_ops(monkeypatch):
    """Without a GPU, the public wrappers call the interpreter-backed copy of the ops, for
    the duration of one test only."""
    if not GPU:
        setup_ops()
        monkeypatch.setattr(attention, "NAMESPACE", TEST_NS)
    yield
