"""mytorch's OpenMP elementwise and reduction kernels vs ATen on the CPU, side by side.

Usage: python -m mytorch_ext.bench.cpu_elementwise_reduce [--n 16777216] [--reps 15]
Each row: correctness against ATen first, then the median of --reps timed runs of each
(interleaved, after a warm-up), GB/s from the minimum bytes moved, and the ratio
ATen time / mytorch time (> 1: mytorch is faster).
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import mytorch_ext  # noqa: F401

m = torch.ops.mytorch


def timeit(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    n = args.n
    x = torch.randn(n)
    y = torch.randn(n)
    rows = int(n ** 0.5)
    x2 = x[: rows * (n // rows)].view(rows, n // rows)
    e = 4  # bytes per float
    cases = [
        ("add", lambda: m.add(x, y), lambda: torch.add(x, y), 3 * n * e),
        ("mul", lambda: m.mul(x, y), lambda: torch.mul(x, y), 3 * n * e),
        ("exp", lambda: m.exp(x), lambda: torch.exp(x), 2 * n * e),
        ("gelu", lambda: m.gelu(x), lambda: F.gelu(x), 2 * n * e),
        ("gelu tanh", lambda: m.gelu(x, "tanh"), lambda: F.gelu(x, approximate="tanh"), 2 * n * e),
        ("sigmoid", lambda: m.sigmoid(x), lambda: torch.sigmoid(x), 2 * n * e),
        ("sum (all)", lambda: m.sum(x), lambda: torch.sum(x), n * e),
        (f"sum (dim -1, {rows}x{n // rows})", lambda: m.sum(x2, [-1]), lambda: torch.sum(x2, -1), n * e),
        (f"sum (dim 0, {rows}x{n // rows})", lambda: m.sum(x2, [0]), lambda: torch.sum(x2, 0), n * e),
        ("max (all)", lambda: m.amax(x), lambda: torch.max(x), n * e),
        (f"max (dim -1)", lambda: m.max_dim(x2, -1)[0], lambda: torch.max(x2, -1)[0], n * e),
        (f"var (dim -1)", lambda: m.var(x2, [-1]), lambda: torch.var(x2, -1), n * e),
    ]
    print(f"mytorch vs ATen, CPU, float32, n = {n}, {torch.get_num_threads()} threads, median of {args.reps}")
    print(f"{'op':<26} {'mytorch ms':>11} {'ATen ms':>9} {'mytorch GB/s':>13} {'ATen GB/s':>10} {'ratio':>6}")
    for name, ours, ref, nbytes in cases:
        a, b = ours(), ref()
        tol = 1e-5 if "sum" not in name and "var" not in name else 1e-4
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * 10)
        for _ in range(2):
            ours(), ref()
        t_ours, t_ref = [], []
        for _ in range(3):  # interleave so that machine noise hits both
            t_ours.append(timeit(ours, args.reps // 3 + 1))
            t_ref.append(timeit(ref, args.reps // 3 + 1))
        to, tr = statistics.median(t_ours), statistics.median(t_ref)
        print(f"{name:<26} {to * 1e3:>11.2f} {tr * 1e3:>9.2f} {nbytes / to / 1e9:>13.1f} {nbytes / tr / 1e9:>10.1f} "
              f"{tr / to:>5.2f}x")


if __name__ == "__main__":
    main()
