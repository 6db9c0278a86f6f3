"""Launch configurations for the FlashAttention kernels: candidates, tuned table, tuning cache.

Lookup order for a shape family (kind, dtype, head_dim, masking, seqlen bucket) on an arch:
1. the per-user cache ~/.cache/mytorch/flash_attn-<triton version>.json (written by tuning);
2. the table committed next to this file (flash_attn_tuned.json, from GPU runs);
3. the first candidate for the arch.
With MYTORCH_FA_AUTOTUNE=1, a family found in neither is tuned once (each candidate timed
with triton.testing.do_bench) and the choice saved to the cache, so a second process does
not tune again. A candidate that does not fit the GPU (shared memory, registers) is skipped
and the next one used: older or smaller GPUs fall back instead of failing.
"""
from __future__ import annotations

import json
import os
import threading
import warnings

import torch
import triton

_HERE = os.path.dirname(os.path.abspath(__file__))
TABLE_PATH = os.path.join(_HERE, "flash_attn_tuned.json")
_lock = threading.Lock()
_table = None
_cache = None


def _cfg(bm, bn, warps, stages, tma=False):
    c = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps, "num_stages": stages}
    if tma:  # Q/K/V tiles by TMA bulk copies (Hopper and newer, plain layouts only)
        c["TMA"] = True
    return c


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


_ARCH: dict = {}  # device index -> "sm90" (asked once: the query costs more than a launch)


def arch(device) -> str:
    if device.type != "cuda" or interpreting():
        return "interp"
    index = device.index if device.index is not None else torch.cuda.current_device()
    name = _ARCH.get(index)
    if name is None:
        major, minor = torch.cuda.get_device_capability(index)
        name = _ARCH[index] = f"sm{major}{minor}"
    return name


# Candidate tilings (BLOCK_M, BLOCK_N, num_warps, num_stages), best first, for head_dim up to
# 64, up to 128 and larger.
_FWD_TILES = (
    [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 4, 4), (64, 64, 4, 3)],
    [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3)],
    [(128, 64, 8, 2), (64, 64, 4, 2), (64, 32, 4, 2)],
)
_BWD_TILES = {
    "kv": (  # BLOCK_N keys per program, BLOCK_M queries per step
        [(64, 128, 8, 3), (32, 128, 4, 3), (64, 64, 4, 3), (64, 128, 4, 2)],
        [(64, 128, 8, 2), (32, 128, 4, 3), (64, 64, 4, 2), (32, 64, 4, 2)],
        [(32, 64, 4, 2), (16, 64, 4, 2), (32, 32, 4, 1)],
    ),
    "dq": (  # BLOCK_M queries per program, BLOCK_N keys per step
        [(128, 64, 8, 3), (128, 32, 4, 3), (64, 64, 4, 3)],
        [(128, 64, 8, 2), (128, 32, 4, 3), (64, 64, 4, 2)],
        [(64, 32, 4, 2), (64, 16, 4, 2), (32, 32, 4, 1)],
    ),
}


def _tiles(table, head_dim):
    return [_cfg(*t) for t in table[0 if head_dim <= 64 else 1 if head_dim <= 128 else 2]]


def fwd_configs(device, head_dim):
    if arch(device) == "interp":
        return [_cfg(16, 16, 4, 1)]
    hopper = arch(device).startswith("sm9") or arch(device).startswith("sm10")
    c = _tiles(_FWD_TILES, head_dim)
    if not hopper:  # Ampere: less shared memory, plain mma
        c = [x for x in c if x["BLOCK_N"] <= 64] + [_cfg(64, 32, 4, 2)]
    else:  # the same tilings with TMA loads
        c += [_cfg(**{**_plain(x), "tma": True}) for x in c if x["BLOCK_M"] >= 64]
    return c + [_cfg(32, 32, 4, 1)]


def _plain(cfg):
    return {"bm": cfg["BLOCK_M"], "bn": cfg["BLOCK_N"], "warps": cfg["num_warps"],
            "stages": cfg["num_stages"]}


def bwd_configs(device, head_dim, kind):
    if arch(device) == "interp":
        return [_cfg(16, 16, 4, 1)]
    return _tiles(_BWD_TILES["kv" if kind == "kv" else "dq"], head_dim) + [_cfg(16, 16, 4, 1)]


def _key_str(arch_name, key):
    return "|".join([arch_name] + [str(k) for k in key])


def cache_path() -> str:
    root = os.environ.get("MYTORCH_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "mytorch")
    return os.path.join(root, f"flash_attn-{triton.__version__}.json")


def _load(path, required):
    """The JSON table at path. A missing or unreadable required table (the one shipped with
    the package) warns once: without it every shape runs its first candidate config."""
    try:
        with open(path) as f:
            table = json.load(f)
        if not isinstance(table, dict):
            raise ValueError("not a JSON object")
        return table
    except FileNotFoundError:
        if required:
            warnings.warn(f"mytorch_ext: the tuned FlashAttention table {path} is missing (an "
                          "incomplete install?); the untuned default configs are used",
                          RuntimeWarning, stacklevel=3)
        return {}
    except (OSError, ValueError) as e:
        warnings.warn(f"mytorch_ext: cannot read the FlashAttention config table {path} ({e}); "
                      "it is ignored", RuntimeWarning, stacklevel=3)
        return {}


def _tables():
    global _table, _cache
    if _table is None:
        _table = _load(TABLE_PATH, required=True)
    if _cache is None:
        _cache = _load(cache_path(), required=False)
    return _table, _cache


def _save_cache():
    path = cache_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(_cache, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def chosen(device, key, nearest=False):
    """The config recorded for this family, or None. With nearest, a family that differs
    only in its seqlen bucket may stand in (the closest bucket)."""
    table, cache = _tables()
    k = _key_str(arch(device), key)
    hit = cache.get(k) or table.get(k)
    if hit is not None or not nearest:
        return hit
    prefix = k.rsplit("|", 1)[0] + "|"
    near = [(abs(int(x.rsplit("|", 1)[1]).bit_length() - int(key[-1]).bit_length()), x)
            for src in (cache, table) for x in src if x.startswith(prefix)]
    if not near:
        return None
    x = min(near)[1]
    return cache.get(x) or table.get(x)


def _fits(e) -> bool:
    return isinstance(e, triton.runtime.errors.OutOfResources) or "out of resource" in str(e).lower()


def _tune(configs, launch):
    from triton.testing import do_bench

    best, best_ms = None, float("inf")
    for cfg in configs[:-1]:  # the last candidate is the small fallback
        try:
            launch(cfg)
            ms = do_bench(lambda: launch(cfg), warmup=5, rep=25, return_mode="median")
        except Exception as e:  # noqa: BLE001
            if _fits(e):
                continue
            raise
        if ms < best_ms:
            best, best_ms = cfg, ms
    return best


def run_with_fallback(key, configs, launch, device):
    """Launch with the config chosen for `key`; fall back down `configs` when one does not fit."""
    if arch(device) == "interp":
        launch(configs[0])
        return configs[0]
    pick = chosen(device, key)
    capturing = torch.cuda.is_current_stream_capturing()
    if pick is None and not capturing and os.environ.get("MYTORCH_FA_AUTOTUNE", "0") == "1":
        pick = _tune(configs, launch)
        if pick is not None:
            with _lock:
                _tables()
                _cache[_key_str(arch(device), key)] = pick
                _save_cache()
    pick = pick or chosen(device, key, nearest=True)
    order = ([pick] if pick else []) + [c for c in configs if c != pick]
    last = None
    for cfg in order:
        try:
            launch(cfg)
            return cfg
        except Exception as e:  # noqa: BLE001
            if not _fits(e):
                raise
            last = e
    raise RuntimeError(f"mytorch::flash_attn: no launch configuration fits this GPU ({last})")


def record(device, key, cfg):
    """Store a config for a family in the user cache (used by the benchmark's tuner)."""
    with _lock:
        _tables()
        _cache[_key_str(arch(device), key)] = cfg
        _save_cache()
