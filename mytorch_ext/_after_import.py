"""after_import(name, callback): run callback right after module `name` is first imported,
or now if it already is.

mytorch_ext registers things into modules that are slow to import and that many programs
never load (transformers' modeling code, torch._dynamo, Inductor's decomposition table).
Importing them eagerly would add seconds to `import mytorch_ext`; a sys.meta_path finder
lets each load as usual and runs the registration as its last step instead.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the one module it watches, it wraps the real loader's
    exec_module so that the callbacks run once the module body has executed."""

    def __init__(self, name: str):
        self.name = name
        self.callbacks: list[Callable[[], None]] = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        _remove(self)
        spec = importlib.util.find_spec(fullname)  # the next finders, this one now removed
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module, callbacks = loader.exec_module, self.callbacks

        def exec_then_run(module):
            exec_module(module)
            for cb in callbacks:
                _run(cb, fullname)

        loader.exec_module = exec_then_run  # this spec's own loader instance
        return spec


def _run(callback: Callable[[], None], name: str) -> None:
    """A registration that fails warns: it must not make the import of `name` fail."""
    try:
        callback()
    except Exception as e:  # noqa: BLE001 - any failure of ours, reported, not raised
        import warnings

        warnings.warn(f"mytorch_ext: registering {getattr(callback, '__qualname__', callback)} after "
                      f"{name} loaded failed ({e!r}); {name} works without it",
                      RuntimeWarning, stacklevel=2)


def _remove(finder) -> None:
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)


def _loaded(name: str, ready: Callable[[object], bool] | None) -> bool:
    m = sys.modules.get(name)
    return m is not None and (ready is None or ready(m))


def after_import(name: str, callback: Callable[[], None],
                 ready: Callable[[object], bool] | None = None) -> None:
    """callback() now if `name` is imported (and ready(module) holds: a module still
    executing its body is in sys.modules already), else right after its first import."""
    if _loaded(name, ready):
        _run(callback, name)
        return
    for f in sys.meta_path:
        if isinstance(f, _AfterImport) and f.name == name:
            if callback not in f.callbacks:
                f.callbacks.append(callback)
            return
    finder = _AfterImport(name)
    finder.callbacks.append(callback)
    sys.meta_path.insert(0, finder)


def cancel(name: str, callback: Callable[[], None]) -> None:
    """Forget a callback that has not run yet."""
    for f in list(sys.meta_path):
        if isinstance(f, _AfterImport) and f.name == name and callback in f.callbacks:
            f.callbacks.remove(callback)
            if not f.callbacks:
                _remove(f)
