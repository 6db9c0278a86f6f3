"""`python -m mytorch_ext bench ...` and the mytorch-bench script: the bench suites live in the
source checkout's top-level benchmarks/ folder, not in this package. This module finds that
folder (beside the package's own folder, else in the current directory), imports it as the
`benchmarks` package and runs its CLI; where there is none (a wheel install) it says so in
one line and returns 2."""
from __future__ import annotations

import importlib.util
import os
import sys

WHERE = ("the bench suites live in the benchmarks/ folder of a mytorch source checkout (the "
         "wheel does not ship them): run `python -m mytorch_ext bench` in the checkout")


def find() -> str | None:
    """The benchmarks/ folder of the checkout this package is in, or of the current directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.dirname(here), os.getcwd()):
        path = os.path.join(root, "benchmarks")
        if os.path.isfile(os.path.join(path, "cli.py")) and os.path.isdir(os.path.join(path, "suites")):
            return path
    return None


def load(path: str | None = None):
    """The `benchmarks` package of folder `path` (default: find()), imported by its path; None
    where there is no such folder."""
    path = path or find()
    if path is None:
        return None
    path = os.path.realpath(path)
    mod = sys.modules.get("benchmarks")
    if mod is not None:
        if os.path.realpath(os.path.dirname(mod.__file__ or "")) != path:
            raise ImportError(f"another package named benchmarks is imported ({mod.__file__}), "
                              f"not the bench suites of {path}")
        return mod
    spec = importlib.util.spec_from_file_location("benchmarks", os.path.join(path, "__init__.py"),
                                                  submodule_search_locations=[path])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["benchmarks"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules["benchmarks"]
        raise
    return mod


def main(argv=None) -> int:
    """The bench CLI (benchmarks/cli.py) with argv (default: sys.argv[1:])."""
    if load() is None:
        print(f"mytorch_ext bench: {WHERE}", file=sys.stderr)
        return 2
    from benchmarks.cli import main as cli_main

    return cli_main(list(sys.argv[1:] if argv is None else argv))
