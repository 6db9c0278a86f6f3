"""Runs a function on several processes joined by torch.distributed, for the tests.

run_ranks(fn, tmp_path) spawns one process per rank, joins them through a FileStore in
tmp_path, calls fn(rank, world_size, *args) on each and returns the results by rank. A
rank that raises fails the call with its traceback; a run that outlives `timeout` is
killed and fails too, so a hang never outlives the test.
"""
from __future__ import annotations

import datetime
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.multiprocessing as mp


class RankFailed(AssertionError):
    def __init__(self, errors: dict, exitcodes: dict, elapsed: float):
        self.errors, self.exitcodes, self.elapsed = errors, exitcodes, elapsed
        text = "\n".join(f"--- rank {r} ---\n{e}" for r, e in sorted(errors.items()))
        super().__init__(f"ranks failed after {elapsed:.1f}s (exit codes {exitcodes}):\n{text}")


def _entry(fn, rank, world_size, backend, out_dir, timeout_s, args):
    torch.set_num_threads(1)
    out = Path(out_dir)
    try:
        import torch.distributed as dist

        import mytorch_ext  # noqa: F401  the device
        import mytorch_ext.distributed  # noqa: F401  the c10d backend

        if backend is not None:
            dist.init_process_group(backend, init_method=f"file://{out / 'store'}", rank=rank,
                                    world_size=world_size,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        result = fn(rank, world_size, *args)
        torch.save(result, out / f"rank{rank}.pt")
        if backend is not None:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  reported to the parent
        (out / f"rank{rank}.err").write_text(traceback.format_exc())
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def run_ranks(fn, tmp_path, world_size: int = 2, backend: str | None = "mytorch",
              timeout: float = 180.0, collective_timeout: float = 60.0, args: tuple = ()):
    out_dir = Path(tmp_path) / f"ranks_{time.monotonic_ns()}"
    out_dir.mkdir(parents=True)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_entry, daemon=True,
                         args=(fn, r, world_size, backend, str(out_dir), collective_timeout, args))
             for r in range(world_size)]
    start = time.monotonic()
    for p in procs:
        p.start()
    deadline = start + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
        procs[r].join(5)
    elapsed = time.monotonic() - start
    errors = {r: (out_dir / f"rank{r}.err").read_text()
              for r in range(world_size) if (out_dir / f"rank{r}.err").exists()}
    for r in hung:
        errors[r] = f"still running after {timeout:.0f}s: killed"
    exitcodes = {r: p.exitcode for r, p in enumerate(procs)}
    for r, code in exitcodes.items():
        if code != 0 and r not in errors:
            errors[r] = f"exited with code {code} and no traceback"
    if errors:
        raise RankFailed(errors, exitcodes, elapsed)
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=False) for r in range(world_size)]
