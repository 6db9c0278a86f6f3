import pytest

import mytorch_ext
from fa_ref import GPU, setup_ops
from mytorch_ext.ops import attention


@pytest.fixture(autouse=True)
def _wrappers_call_the_test_ops(monkeypatch):
    """Without a GPU, mytorch_ext's attention wrappers call the interpreter-backed copy of the
    ops (attention.bind over it), for the duration of one test only."""
    if not GPU:
        wrappers = attention.bind(setup_ops())
        for name in ("flash_attn", "flash_attn_varlen", "scaled_dot_product_attention"):
            monkeypatch.setattr(mytorch_ext, name, getattr(wrappers, name))
    yield
