"""python -m mytorch_ext bench charts [--out DIR] [--device auto|cpu] [SUITE ...]: every bench suite
on the hardware present, one chart per suite.

Each suite runs in a process of its own (`python -m mytorch_ext bench SUITE --quick --device D
--out TMP`): on the GPU where it can run there (CUDA present and the suite's skip_reason("cuda")
is None), else on the CPU, with the mytorch device registered (MYTORCH_DEVICE=1 unless set;
import leaves it out where a GPU is); `--device cpu` keeps every suite on the CPU. For each
suite the out folder gets, named after the hardware that ran it (`h100_attention`,
`cpu-xeon_cpu`):

  HW_SUITE.png   every table of the suite as grouped bars (common.draw_bars), one panel each
                 (two a row when they are narrow), the hardware, torch version and mode in
                 the title;
  HW_SUITE.txt   the suite's console output: environment line, timing spread, the tables;
  HW_SUITE.json  the suite's JSON (environment, timing spread, tables).

A suite that cannot run here says why in one line; one that fails or passes --timeout is
reported; the others go on. The exit status is 1 when any failed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

from . import common


def gpu_slug(name: str) -> str:
    """A short file-name tag for a GPU model: 'NVIDIA H100 80GB HBM3' -> 'h100',
    'NVIDIA GeForce RTX 4090' -> 'rtx4090'."""
    tokens = re.findall(r"[a-z0-9]+", name.lower())
    tokens = [t for t in tokens if t not in ("nvidia", "geforce", "tesla", "amd", "instinct", "radeon")]
    for i, t in enumerate(tokens):
        if re.search(r"\d", t):
            if i > 0 and tokens[i - 1] in ("rtx", "gtx", "titan", "quadro"):
                return tokens[i - 1] + t
            return t
    return tokens[0] if tokens else "gpu"


def cpu_slug(name: str) -> str:
    """A short file-name tag for a CPU model: 'Intel(R) Xeon(R) Processor' -> 'cpu-xeon',
    'AMD EPYC 7763 64-Core Processor' -> 'cpu-epyc-7763'."""
    s = name.lower()
    s = re.sub(r"\((r|tm)\)", " ", s)
    s = re.sub(r"@.*$", " ", s)                       # clock speed
    s = re.sub(r"\b\d+-core\b", " ", s)
    tokens = [t for t in re.findall(r"[a-z0-9]+", s)
              if t not in ("intel", "amd", "genuine", "cpu", "processor", "with", "radeon", "graphics")]
    if not tokens:
        return "cpu"
    family, rest = tokens[0], tokens[1:]
    model = next((t for t in rest if re.search(r"\d", t)), None)
    return "cpu-" + family + (f"-{model}" if model else "")


def _plan(suites: list[str], force_cpu: bool) -> list[tuple[str, str]]:
    """(suite, device) for each suite: cuda where a GPU is present and the suite runs there,
    else cpu (where the suite's own process says in one line if it cannot run)."""
    import torch

    from .cli import suite_module

    gpu = not force_cpu and torch.cuda.is_available()
    plan = []
    for name in suites:
        mod = suite_module(name)
        plan.append((name, "cuda" if gpu and mod.skip_reason("cuda") is None else "cpu"))
    return plan


def _hardware(env: dict, device: str) -> tuple[str, str]:
    """(file-name tag, full name) of what ran a suite, from its JSON environment."""
    if device == "cuda":
        name = env.get("gpu") or "GPU"
        return gpu_slug(name), name
    name = env.get("cpu") or "CPU"
    return cpu_slug(name), f"{name} ({env.get('cpu_count')} CPUs)"


def tables_from_json(data: dict) -> list[common.Table]:
    """The suite's tables back from its JSON (values only; ratios are recomputed)."""
    out = []
    for t in data["tables"]:
        table = common.Table(t["title"], t["unit"], t["convention"], list(t["impls"]),
                             higher_is_better=t["higher_is_better"])
        for row in t["rows"]:
            table.add(row["shape"], {i: row.get(i) for i in t["impls"]})
        out.append(table)
    return out


def suite_figure(tables: list[common.Table], plt, title: str):
    """One figure: a panel of grouped bars per table (common.draw_bars), two panels a row when
    there are several narrow ones, the title above them all."""
    tables = [t for t in tables if t.rows]
    width = max([common.chart_width(t) for t in tables] + [7.0])
    ncols = 2 if len(tables) > 1 and width <= 10 else 1
    nrows = -(-len(tables) // ncols)
    height = 0.9 + 4.8 * nrows
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height), squeeze=False)
    flat = list(axes.flat)
    for t, ax in zip(tables, flat):
        common.draw_bars(t, ax)
    for ax in flat[len(tables):]:
        ax.set_visible(False)
    fig.suptitle(textwrap.fill(title, int(width * ncols * 8)), fontsize=12)  # ~8 characters an inch
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.65 / height))
    return fig


def _run_suite(name: str, device: str, mode: str, tmp: str, timeout: float) -> tuple[int, str, list[str]]:
    """Runs one suite in a child process; (exit status, its stdout, its warning lines). The
    child's stderr (progress, warnings) is passed through as it comes."""
    cmd = [sys.executable, "-m", "mytorch_ext", "bench", name, f"--{mode}", "--device", device, "--out", tmp]
    env = dict(os.environ)
    if device == "cpu":  # the mytorch device too, which import leaves out where a GPU is
        env.setdefault("MYTORCH_DEVICE", "1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                            env=env)
    out_lines: list[str] = []
    warnings: list[str] = []

    def pump_out():
        for line in proc.stdout:
            out_lines.append(line)
            sys.stdout.write(line)

    def pump_err():
        for line in proc.stderr:
            sys.stderr.write(line)
            if "WARNING" in line:
                warnings.append(line.strip())

    threads = [threading.Thread(target=pump_out), threading.Thread(target=pump_err)]
    for th in threads:
        th.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        out_lines.append(f"[{name}] stopped after {timeout:.0f} s (--timeout)\n")
        rc = rc or 124
    for th in threads:
        th.join()
    return rc, "".join(out_lines), warnings


def main(argv=None) -> int:
    from .cli import available_suites

    suites = available_suites()
    p = argparse.ArgumentParser(prog="python -m mytorch_ext bench charts",
                                description="run every bench suite on the hardware present and "
                                            "write one chart per suite with its tables")
    p.add_argument("suites", nargs="*", metavar="SUITE", help=f"any of {', '.join(suites)} (default: all)")
    p.add_argument("--out", default=os.path.join("docs", "charts"), help="folder for the PNG, TXT and "
                   "JSON files (default: docs/charts)")
    p.add_argument("--device", choices=["auto", "cpu"], default="auto",
                   help="auto (default): each suite on the GPU where it runs there, else the CPU; "
                        "cpu: every suite on the CPU")
    p.add_argument("--mode", choices=["quick", "full"], default="quick",
                   help="the suites' sizes (default: quick)")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # tiny shapes, for the tests
    p.add_argument("--timeout", type=float, default=900, help="seconds one suite may run (default 900)")
    args = p.parse_args(argv)
    unknown = [s for s in args.suites if s not in suites]
    if unknown:
        p.error(f"unknown suite(s) {', '.join(unknown)}; valid: {', '.join(suites)}")
    if args.smoke:
        args.mode = "smoke"

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("charts need matplotlib (pip install matplotlib)", file=sys.stderr)
        return 2

    os.makedirs(args.out, exist_ok=True)
    failed, written = [], []
    t_all = time.perf_counter()
    for name, device in _plan(args.suites or suites, args.device == "cpu"):
        print(f"[charts] {name} on {device} ({args.mode})", flush=True)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            rc, stdout, warnings = _run_suite(name, device, args.mode, tmp, args.timeout)
            jpath = os.path.join(tmp, f"{name}.json")
            data = None
            if os.path.exists(jpath):
                with open(jpath) as f:
                    data = json.load(f)
        if rc == 0 and data is None and f"[{name}] skipped on {device}:" in stdout:
            print(f"[charts] {name}: skipped, no chart")
            continue
        if rc != 0 or data is None or not any(t["rows"] for t in data["tables"]):
            print(f"[charts] {name}: failed (exit status {rc}), no chart")
            failed.append(name)
            continue
        tag, hw = _hardware(data["environment"], device)
        base = os.path.join(args.out, f"{tag}_{name}")
        with open(base + ".json", "w") as f:
            json.dump(data, f, indent=2)
        with open(base + ".txt", "w") as f:
            f.write(f"$ python -m mytorch_ext bench {name} --{args.mode} --device {device}\n")
            # the child's own files were temporary: its "done in ... -> PATHS" line loses the paths
            f.write(re.sub(r"^(\[\S+\] done in \S+) -> .*$", r"\1", stdout, flags=re.M))
            for w in warnings:
                f.write(w + "\n")
        env = data["environment"]
        title = f"{name} suite on {hw}; torch {env.get('torch')}, --{args.mode}"
        fig = suite_figure(tables_from_json(data), plt, title)
        fig.savefig(base + ".png", dpi=100)
        plt.close(fig)
        written.append(base + ".png")
        print(f"[charts] {name}: {base}.png, .txt, .json ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"[charts] done: {len(written)} PNG in {time.perf_counter() - t_all:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
