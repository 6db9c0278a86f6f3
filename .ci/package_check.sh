#!/usr/bin/env bash
# Packaging check, run by .ci/run after `make test`:
#   1. build the sdist (with the dev venv's python);
#   2. in a fresh venv (no system site-packages) with a CPU torch, build a wheel from that
#      sdist (MYTORCH_CUDA=0) and install it;
#   3. smoke-test the installed wheel from outside the source tree: import, `info`, one CPU
#      op, the tuned FlashAttention table present and non-empty, the mytorch-bench script
#      (the bench suites are not in the wheel: it says in one line where they live);
#   4. compile the CUDA sources of the sdist for one architecture (MYTORCH_CUDA_ONLY=1), so
#      that they cannot rot on machines without a GPU;
#   5. compile the Gluon Hopper attention kernels for sm90 with the oldest supported Triton
#      (TRITON_OLDEST, 3.6.0) as well: `make test` compiles them with the dev venv's Triton,
#      and the two differ in what Gluon accepts. Skipped in one line where the index has no
#      such wheel.
# Usage: .ci/package_check.sh [WORK_DIR]   (default: build/package-check)
# Env: PY (dev venv python, default .venv/bin/python), TORCH_SPEC (default "torch>=2.11"),
#      MAX_JOBS (default: nproc), SKIP_CUDA_CHECK=1 only where no nvcc can exist.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
WORK=$(realpath -m "${1:-build/package-check}")
TORCH_SPEC=${TORCH_SPEC:-torch>=2.11}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
export PIP_DISABLE_PIP_VERSION_CHECK=1
rm -rf "$WORK"
mkdir -p "$WORK/dist"
t0=$SECONDS
say() { echo "== package-check [$((SECONDS - t0)) s] $*"; }

say "sdist"
"$PY" setup.py -q sdist -d "$WORK/dist" >"$WORK/sdist.log" 2>&1 || { tail -30 "$WORK/sdist.log"; exit 1; }
SDIST=$(ls "$WORK"/dist/mytorch-*.tar.gz)
# Every source and header of csrc/ is in the sdist.
missing=$(comm -23 <(git ls-files csrc | sort) \
                   <(tar -tzf "$SDIST" | sed -n 's|^mytorch-[^/]*/||p' | grep '^csrc/' | sort))
if [ -n "$missing" ]; then echo "sdist lacks: $missing"; exit 1; fi

say "fresh venv with a CPU torch"
python3 -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
# torch from the local wheels pip is configured with (find-links) when there is one, so that
# nothing large is downloaded; then its dependencies (or torch itself) from the configured index.
"$VPY" -m pip install -q --no-index --no-deps "$TORCH_SPEC" 2>/dev/null \
  && echo "torch from local wheels: $("$VPY" -m pip show torch | sed -n 's/^Version: //p')" \
  || echo "no local torch wheel; installing $TORCH_SPEC from the index"
"$VPY" -m pip install -q "$TORCH_SPEC" numpy setuptools wheel ninja

say "wheel from the sdist (CPU only)"
MYTORCH_CUDA=0 "$VPY" -m pip wheel -q --no-build-isolation --no-deps -w "$WORK/dist" "$SDIST" \
  >"$WORK/wheel.log" 2>&1 || { tail -40 "$WORK/wheel.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/mytorch-*.whl)
"$VPY" - "$WHEEL" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for want in ("mytorch_ext/triton/flash_attn_tuned.json", "mytorch_ext/__main__.py"):
    assert want in names, f"the wheel lacks {want}"
assert any(n.startswith("mytorch_ext/_C.") and n.endswith(".so") for n in names), "no _C in the wheel"
extra = [n for n in names if n.startswith(("benchmarks/", "mytorch_ext/bench/"))]
assert not extra, f"the bench suites belong to the checkout, not the wheel: {extra[:3]}"
PY
"$VPY" -m pip install -q "$WHEEL"

say "smoke test of the installed wheel"
mkdir -p "$WORK/smoke"
(cd "$WORK/smoke" && "$VPY" -I - <<'PY'
import importlib.resources, json, os, subprocess, sys
import torch
import mytorch_ext
here = os.path.dirname(mytorch_ext.__file__)
assert "site-packages" in here, f"imported {here}, not the installed wheel"
out = subprocess.run([sys.executable, "-m", "mytorch_ext", "info"], check=True,
                     capture_output=True, text=True).stdout
print(out)
assert "cpu_flags" in out
a, b = torch.randn(64, 32), torch.randn(32, 48)
torch.testing.assert_close(torch.ops.mytorch.mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
table = json.loads((importlib.resources.files("mytorch_ext.triton") / "flash_attn_tuned.json").read_text())
assert isinstance(table, dict) and table, "the tuned FlashAttention table is empty"
# the bench suites stay in the source checkout (benchmarks/): the script says so in one line
bench = os.path.join(os.path.dirname(sys.executable), "mytorch-bench")
r = subprocess.run([bench, "--help"], capture_output=True, text=True)
assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
assert r.stderr.count("\n") == 1 and "benchmarks/ folder of a mytorch source checkout" in r.stderr, r.stderr
import importlib.util
assert importlib.util.find_spec("benchmarks") is None, "the wheel installed a benchmarks package"
print(f"smoke test passed: {len(table)} tuned configs, mm on {torch.__version__}")
PY
)
ls -l "$WORK"/dist

if [ "${SKIP_CUDA_CHECK:-0}" = 1 ]; then
  say "CUDA compile check skipped (SKIP_CUDA_CHECK=1)"
else
  say "CUDA compile check (MYTORCH_CUDA_ONLY=1, TORCH_CUDA_ARCH_LIST=${CUDA_CHECK_ARCH:-9.0})"
  mkdir -p "$WORK/cuda"
  tar -xzf "$SDIST" -C "$WORK/cuda"
  (cd "$WORK"/cuda/mytorch-* && MYTORCH_CUDA=1 MYTORCH_CUDA_ONLY=1 MYTORCH_PCH=0 \
     TORCH_CUDA_ARCH_LIST="${CUDA_CHECK_ARCH:-9.0}" "$PY" setup.py -q build_ext >"$WORK/cuda.log" 2>&1) \
    || { grep -m20 -E "error|Error" "$WORK/cuda.log"; tail -20 "$WORK/cuda.log"; exit 1; }
fi
TRITON_OLDEST=${TRITON_OLDEST:-3.6.0}
say "Gluon Hopper kernels compiled with Triton $TRITON_OLDEST"
if "$PY" -m pip install -q --no-deps --target "$WORK/triton-oldest" "triton==$TRITON_OLDEST" \
     >"$WORK/triton-oldest.log" 2>&1; then
  PYTHONPATH="$WORK/triton-oldest" TRITON_CACHE_DIR="$WORK/triton-oldest-cache" \
    "$PY" tests/triton/hopper_compile.py >"$WORK/hopper-compile.log" 2>&1 \
    || { tail -30 "$WORK/hopper-compile.log"; exit 1; }
  "$PY" - "$WORK/hopper-compile.log" "$TRITON_OLDEST" <<'PY'
import json, sys
result = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert result["skip"] is None and result["triton"] == sys.argv[2], result
assert result["compiled"].get("_fwd_kernel") and result["compiled"].get("_bwd_kv_kernel"), result
print(f"compiled with Triton {result['triton']}: {result['compiled']}")
PY
else
  echo "no triton==$TRITON_OLDEST wheel in the index: the oldest-Triton compile check is skipped"
fi
say "done"
