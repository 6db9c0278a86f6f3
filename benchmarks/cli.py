"""python -m mytorch_ext bench [SUITE ...] [--device cpu|cuda|mytorch] [--quick] [--out DIR]
python -m mytorch_ext bench charts [--out DIR]: every suite, one chart each (charts.py)

Each suite is a module ``benchmarks.suites.<name>`` with
``skip_reason(device) -> str | None`` (one line: why it cannot run here) and
``run(device, mode, progress) -> list[Table]``, mode being "smoke" (tiny shapes, for the
tests: --smoke), "quick" (--quick) or "full".
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

from . import common, suites, timing


def available_suites() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(suites.__path__) if not m.name.startswith("_"))


def suite_module(name: str):
    return importlib.import_module(f"{suites.__name__}.{name}")


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Progress:
    """A tqdm bar when tqdm is installed, otherwise one line per step."""

    def __init__(self, total: int, desc: str):
        try:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
        except ImportError:
            self._bar = None
        self.desc = desc

    def step(self, label: str = "") -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(label)
            self._bar.update(1)
        else:
            print(f"  {self.desc}: {label}", file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["charts"]:  # every suite, one chart each (charts.py)
        from .charts import main as charts_main

        return charts_main(argv[1:])
    names = available_suites()
    p = argparse.ArgumentParser(prog="python -m mytorch_ext bench",
                                description="side-by-side speed comparisons")
    p.add_argument("suites", nargs="*", metavar="SUITE", help=f"any of {', '.join(names)} (default: all)")
    p.add_argument("--device", choices=["cpu", "cuda", "mytorch"], default=None,
                   help="where to run (default: cuda when a GPU is present, else cpu)")
    p.add_argument("--quick", action="store_true", help="small shapes, few repeats (< 2 min on 2 CPU cores)")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # tiny shapes, for the tests
    p.add_argument("--out", default="bench_out", help="folder for JSON and PNG results")
    args = p.parse_args(argv)
    unknown = [s for s in args.suites if s not in names]
    if unknown:
        p.error(f"unknown suite(s) {', '.join(unknown)}; valid: {', '.join(names)}")
    device = args.device or _default_device()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"

    import torch

    import mytorch_ext

    if device == "mytorch" and not hasattr(torch, "mytorch") and mytorch_ext._info.NATIVE_ERROR is None:
        mytorch_ext.register_device()  # not registered at import when a GPU is present

    timing.steady_host_memory()
    env = common.environment()
    print(f"device={device}, mode={mode}; " + ", ".join(f"{k}={v}" for k, v in env.items()))
    all_tables: list[tuple[str, common.Table]] = []
    failed = []
    for name in args.suites or names:
        mod = suite_module(name)
        reason = mod.skip_reason(device)
        if reason:
            print(f"[{name}] skipped on {device}: {reason}")
            continue
        t0 = time.perf_counter()
        try:
            tables = mod.run(device, mode, Progress)
        except Exception as e:  # one suite's failure does not stop the others
            first = (str(e).strip().splitlines() or [""])[0]
            print(f"[{name}] failed: {type(e).__name__}: {first}")
            failed.append(name)
            continue
        paths = common.write_outputs(args.out, name, tables, device=device, mode=mode)
        for t in tables:
            all_tables.append((name, t))
        print(f"[{name}] done in {time.perf_counter() - t0:.1f}s -> {', '.join(paths)}")
    for name, t in all_tables:
        print()
        print(t.format())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
