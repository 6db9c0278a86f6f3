"""Python side of every mytorch:: op: fake (meta) kernels, autograd, public wrappers.

Each module here is one op family. All of them are imported, so a new family
needs no edit in this file.
"""
import importlib
import pkgutil

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if not _m.startswith("_"):
        importlib.import_module(f"{__name__}.{_m}")
