"""Times the same mytorch ops in several builds of the extension, and ATen, in one run.

    python benchmarks/isa_builds.py --build portable=SRC_A --build native=SRC_B [--rounds 5]

Each --build NAME=DIR names a source tree whose extension is built in place (DIR/mytorch_ext/_C*.so,
DIR/python): e.g. the default portable build and one built with MYTORCH_CPU_FLAGS=native. Every
round runs each build in a process of its own (PYTHONPATH=DIR:DIR/python), in turn, so that
the builds share the machine's load alike; each process also times ATen. A process times each
case as samples of back-to-back calls lasting >= 20 ms and keeps the median sample; by
default a sample is the process's CPU time, not the elapsed time, so that on cores shared with
other work the time they take does not count (run it with --threads 1). Freed outputs stay in
the heap (timing.steady_host_memory), as in the bench suites. The report:
per case and build, the median over the rounds with min..max, then ATen pooled over every
process, and each build's time relative to the first build.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# (name, inputs, mytorch call, ATen call), evaluated in the child: fp32, past the L2 cache;
# outputs stay under 32 MB, the largest block glibc keeps in the heap (see steady_host_memory),
# so that no call pays for fresh pages.
CASES = [
    ("sum 16M", "x = torch.randn(1 << 24)", "mt.sum(x)", "torch.sum(x)"),
    ("sum 4096x4096 dim=-1", "x = torch.randn(4096, 4096)", "mt.sum(x, [-1])", "torch.sum(x, -1)"),
    ("sum 4096x4096 dim=0", "x = torch.randn(4096, 4096)", "mt.sum(x, [0])", "torch.sum(x, 0)"),
    ("mean 16M", "x = torch.randn(1 << 24)", "mt.mean(x)", "torch.mean(x)"),
    ("add 4M", "a, b = torch.randn(1 << 22), torch.randn(1 << 22)", "mt.add(a, b)", "torch.add(a, b)"),
    ("mul 4M", "a, b = torch.randn(1 << 22), torch.randn(1 << 22)", "mt.mul(a, b)", "torch.mul(a, b)"),
    ("add 4096x1024 + row", "a, b = torch.randn(4096, 1024), torch.randn(1024)", "mt.add(a, b)",
     "torch.add(a, b)"),
    ("mul 256K (in L2)", "a, b = torch.randn(1 << 18), torch.randn(1 << 18)", "mt.mul(a, b)", "torch.mul(a, b)"),
]

TIMING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "timing.py")
CHILD = r"""
import importlib.util, json, statistics, sys, time
import torch, mytorch_ext
spec = importlib.util.spec_from_file_location("bench_timing", sys.argv[4])  # this checkout's timing.py
timing = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timing)
timing.steady_host_memory()  # freed outputs stay in the heap: no fresh pages (faults) per call
torch.manual_seed(0)
mt = torch.ops.mytorch
cases = json.loads(sys.argv[1])
samples = int(sys.argv[2])
clock = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
def time_ms(fn):
    ts = timing.sample_times({"fn": fn}, samples=samples, warmup=2, clock=clock)
    return statistics.median(ts["fn"]) * 1e3
out = {"build": mytorch_ext.build_info(), "file": mytorch_ext.__file__, "cases": {}}
for name, setup, ours, aten in cases:
    env = {"torch": torch, "mt": mt}
    exec(setup, env)
    f_ours, f_aten = eval("lambda: " + ours, env), eval("lambda: " + aten, env)
    torch.testing.assert_close(f_ours(), f_aten(), rtol=1e-4, atol=1e-2)
    out["cases"][name] = {"mytorch": time_ms(f_ours), "aten": time_ms(f_aten)}
print(json.dumps(out))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", action="append", required=True, metavar="NAME=DIR")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--samples", type=int, default=7, help="samples per case in one process")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the timed processes")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu (default): the process's CPU time (time.process_time), which leaves out "
                        "the time the scheduler gives other processes on shared cores; use it with "
                        "--threads 1. wall: elapsed time")
    p.add_argument("--json", help="write the raw per-round times here")
    args = p.parse_args()
    builds = [b.split("=", 1) for b in args.build]
    raw = {name: [] for name, _ in builds}
    info = {}
    print(f"load average at start: {os.getloadavg()}", flush=True)
    t_start = time.time()
    for r in range(args.rounds):
        for name, root in builds:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.path.join(root, "python")]),
                   "OMP_NUM_THREADS": str(args.threads)}
            for attempt in range(3):  # a build being replaced while it loads fails once: retry
                res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(CASES), str(args.samples),
                                      args.clock, TIMING], env=env, cwd=root, capture_output=True, text=True)
                if res.returncode == 0:
                    break
                print(f"round {r + 1} {name}: failed, {res.stderr.strip().splitlines()[-1:]}", flush=True)
            res.check_returncode()
            data = json.loads(res.stdout.strip().splitlines()[-1])
            assert os.path.realpath(data["file"]).startswith(os.path.realpath(root)), data["file"]
            info[name] = {k: data["build"][k] for k in ("cpu_flags", "cpu_isa", "torch", "cpu")}
            raw[name].append(data["cases"])
            print(f"round {r + 1}/{args.rounds} {name}: " + ", ".join(
                f"{c} {v['mytorch']:.3f}/{v['aten']:.3f}" for c, v in data["cases"].items()), flush=True)
    print(f"load average at end: {os.getloadavg()}; {time.time() - t_start:.0f} s")
    print(f"threads {args.threads}, {args.clock} clock; {args.rounds} rounds x {args.samples} samples "
          "per case and build")
    for name, _ in builds:
        print(f"  {name}: {info[name]}")

    def stat(xs):
        return statistics.median(xs), min(xs), max(xs)

    names = [n for n, _ in builds]
    head = "| case | " + " | ".join(f"{n} ms" for n in names) + " | ATen ms | " + \
        " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " | " + \
        " | ".join(f"ATen / {n}" for n in names) + " |"
    print()
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for case, *_ in CASES:
        ours = {n: stat([rd[case]["mytorch"] for rd in raw[n]]) for n in names}
        aten = stat([rd[case]["aten"] for n in names for rd in raw[n]])
        cells = [f"{m:.3f} ({lo:.3f}..{hi:.3f})" for m, lo, hi in (ours[n] for n in names)]
        cells.append(f"{aten[0]:.3f} ({aten[1]:.3f}..{aten[2]:.3f})")
        cells += [f"{ours[n][0] / ours[names[0]][0]:.2f}" for n in names[1:]]
        cells += [f"{aten[0] / ours[n][0]:.2f}" for n in names]
        print(f"| {case} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"builds": info, "threads": args.threads, "clock": args.clock, "rounds": raw}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
