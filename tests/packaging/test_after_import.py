"""mytorch_ext._after_import: a callback runs right after a module's first import (or at once
when it is already imported), sees the module's body executed, and cannot break the import."""
import sys
import uuid

import pytest

from mytorch_ext._after_import import after_import, cancel


@pytest.fixture
def module_name(tmp_path, monkeypatch):
    name = f"throwaway_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_runs_after_the_body_on_first_import(module_name):
    seen = []
    after_import(module_name, lambda: seen.append(sys.modules[module_name].VALUE))
    assert seen == []
    __import__(module_name)
    assert seen == [42]
    __import__(module_name)  # not again
    assert seen == [42]


def test_runs_at_once_when_already_imported(module_name):
    __import__(module_name)
    seen = []
    after_import(module_name, lambda: seen.append(True))
    assert seen == [True]


def test_a_failing_callback_warns_and_the_import_succeeds(module_name):
    def broken():
        raise RuntimeError("no table")

    after_import(module_name, broken)
    with pytest.warns(RuntimeWarning, match=f"registering .*broken after {module_name} loaded failed"):
        mod = __import__(module_name)
    assert mod.VALUE == 42


def test_cancel_forgets_the_callback(module_name):
    seen = []

    def cb():
        seen.append(True)

    after_import(module_name, cb)
    cancel(module_name, cb)
    __import__(module_name)
    assert seen == []
