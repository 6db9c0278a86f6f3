"""When one rank raises, the others stop with a clear error within a timeout, not a hang."""
from __future__ import annotations

import re
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import RankFailed, run_ranks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"),
                                reason="the mytorch device is not registered in this process")

COLLECTIVE_TIMEOUT_S = 4.0


def _one_rank_raises(rank, world, stays_alive):
    x = torch.ones(1000, device=f"mytorch:{rank}")
    dist.all_reduce(x)                       # every rank is up and connected
    if rank == 1:
        if stays_alive:                      # raises, but the process lingers (e.g. cleanup)
            try:
                raise ValueError("rank 1 fails on purpose")
            except ValueError:
                time.sleep(COLLECTIVE_TIMEOUT_S + 3)
                raise
        raise ValueError("rank 1 fails on purpose")
    start = time.monotonic()
    try:
        dist.all_reduce(x)                   # rank 0 waits here for a peer that never comes
    except RuntimeError as e:
        raise RuntimeError(f"stopped after {time.monotonic() - start:.1f}s") from e
    return "rank 0 finished a collective without its peer"


@pytest.mark.parametrize("stays_alive", [False, True], ids=["exits", "lingers"])
def test_a_raising_rank_stops_the_others(tmp_path, stays_alive):
    with pytest.raises(RankFailed) as info:
        run_ranks(_one_rank_raises, tmp_path, world_size=2, backend="mytorch",
                  collective_timeout=COLLECTIVE_TIMEOUT_S, args=(stays_alive,))
    errors = info.value.errors
    assert "ValueError: rank 1 fails on purpose" in errors[1]
    # rank 0 stopped on its own (the harness did not kill it), with an error that names
    # the collective and the rank, soon after its peer failed
    assert "still running" not in errors[0]
    assert info.value.exitcodes[0] == 1
    assert "RuntimeError: mytorch c10d backend: all_reduce failed on rank 0 of 2:" in errors[0]
    waited = float(re.search(r"stopped after ([0-9.]+)s", errors[0]).group(1))
    if stays_alive:   # nothing closed the connection: gloo's timeout ended the wait
        assert "timed out" in errors[0].lower(), errors[0]
        assert COLLECTIVE_TIMEOUT_S - 0.5 <= waited < COLLECTIVE_TIMEOUT_S + 15
    else:             # the peer's exit closed the connection
        assert waited < 15
