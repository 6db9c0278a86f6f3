"""README.md's "Adding an op" recipe is exact: the files it names exist and hold the template
op, and following it for a new op is all the coverage tests ask.

The second test follows the recipe in a scratch copy of the repo (the Python package, the
op-coverage tests, tests/opinfo.py). Building the extension there would take too long, so a
throwaway op `mytorch::recipe_twice` gets its schema and kernels through torch.library in the
file the recipe's Python step names, in place of the C++ steps; the rest is the recipe as
written. The coverage tests must fail for the op without its entry in the file the recipe's
test step names, and pass with that one entry added, the op's own opcheck, fuzz and
bad-input cases included.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
OP = "recipe_twice"

# The coverage tests that read the registered op list, and the op's own cases in each.
COVERAGE = {
    "tests/ops/test_opcheck_all.py": ("test_every_registered_op_has_an_entry", f"test_opcheck[{OP}]"),
    "tests/hardening/test_fuzz_mytorch_ops.py": ("test_every_registered_op_is_fuzzed",
                                                 f"test_matches_aten[mytorch::{OP}]"),
    "tests/hardening/test_bad_inputs.py": ("test_every_registered_op_has_a_bad_input_spec",
                                           f"test_bad_inputs[mytorch::{OP}]"),
    "tests/cuda/test_cuda_coverage.py": ("test_every_op_has_a_cuda_kernel", f"test_cuda_matches_cpu[{OP}]"),
}
# What the coverage tests import besides themselves.
SUPPORT = ["pyproject.toml", "tests/conftest.py", "tests/helpers.py", "tests/opinfo.py",
           "tests/hardening/conftest.py", "tests/hardening/strategies.py", "tests/hardening/oracle.py",
           "tests/ops/kvcache_ref.py", "benchmarks/__init__.py", "benchmarks/attention_ref.py"]

# Steps 1 and 2 of the recipe (schema, kernels) in Python, for the scratch copy only.
SCHEMA_AND_KERNELS = f'''

_recipe_lib = torch.library.Library("mytorch", "FRAGMENT")
_recipe_lib.define("{OP}(Tensor x) -> Tensor")


def _{OP}_kernel(x):
    return x * 2


for _key in ("CPU", "CUDA", "PrivateUse1"):
    _recipe_lib.impl("{OP}", _{OP}_kernel, _key)
'''
# Step 3: the fake kernel and the autograd formula.
PYTHON_STEP = f'''

@torch.library.register_fake("mytorch::{OP}")
def _{OP}_fake(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


torch.library.register_autograd("mytorch::{OP}", lambda ctx, grad: grad * 2)
'''
# Step 4: the op's one entry.
ENTRY = f'''

op("{OP}", lambda: [call(r(2, 5, grad=True))], _unary(), lambda x: x * 2, grad=(0,))
'''


def recipe() -> tuple[str, list[str]]:
    """The recipe's template op and its numbered steps, from README.md."""
    m = re.search(r"^## Adding an op\b(.*?)(?=^## |\Z)", README, flags=re.S | re.M)
    assert m, 'README.md has no "## Adding an op" section'
    section = m.group(1)
    template = re.search(r"`mytorch::(\w+)`", section)
    assert template, 'the "Adding an op" section names no template op (`mytorch::<name>`)'
    steps = re.findall(r"^\d+\. (.*?)(?=^\d+\. |\Z)", section, flags=re.S | re.M)
    assert len(steps) >= 3, f"the recipe has {len(steps)} numbered steps"
    return template.group(1), steps


def paths_in(text: str) -> list[str]:
    return re.findall(r"`((?:csrc|mytorch_ext|tests)/[\w/<>.-]+\.\w+)`", text)


def step_path(prefix: str) -> str:
    """The one file of the given folder that the recipe names (its Python step, its test step)."""
    _, steps = recipe()
    found = sorted({p for s in steps for p in paths_in(s) if p.startswith(prefix) and "<" not in p})
    assert found, f'README.md\'s "Adding an op" recipe names no file under {prefix}'
    return found[0]


def test_recipe_names_files_that_exist_and_hold_the_template():
    template, steps = recipe()
    paths = [p for s in steps for p in paths_in(s)]
    missing = [p for p in paths if "<" not in p and not (ROOT / p).exists()]
    missing += [p for p in paths if "<" in p and not (ROOT / p).parent.is_dir()]
    assert not missing, f'README.md\'s "Adding an op" recipe names files that do not exist: {missing}'
    assert "tests/opinfo.py" in paths, \
        'the recipe does not name tests/opinfo.py, the one entry every new op needs'
    assert f"mytorch::{template}" in (ROOT / step_path("mytorch_ext/ops/")).read_text(), \
        f"the recipe's Python file does not register mytorch::{template}"
    assert re.search(rf'^op\("{template}"', (ROOT / "tests/opinfo.py").read_text(), flags=re.M), \
        f"tests/opinfo.py has no entry for the template op {template}"


def scratch_copy(dst: Path):
    for rel in [*COVERAGE, *SUPPORT]:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst / rel)
    shutil.copytree(ROOT / "mytorch_ext", dst / "mytorch_ext",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "bench"))
    for lib in (ROOT / "mytorch_ext").glob("_C*.so"):  # the built extension, shared
        (dst / "mytorch_ext" / lib.name).symlink_to(lib)


def run_coverage(scratch: Path, tmp: Path, name: str) -> dict[str, tuple[str, str]]:
    """Runs the coverage tests and the op's own cases in the scratch copy: node -> (outcome, text)."""
    report = tmp / f"{name}.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(scratch)
    select = " or ".join(["every_registered_op", "every_op_has", OP])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        f"--junitxml={report}", "-k", select, *COVERAGE],
                       cwd=scratch, env=env, capture_output=True, text=True, timeout=900)
    assert report.exists(), f"pytest did not run in the scratch copy:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        node = case.get("name")
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            out[node] = ("failed", (bad.get("message") or "") + (bad.text or ""))
        elif case.find("skipped") is not None:
            out[node] = ("skipped", case.find("skipped").get("message") or "")
        else:
            out[node] = ("passed", "")
    return out


def append(path: Path, text: str):
    path.write_text(path.read_text() + text)


@pytest.mark.skipif(not hasattr(torch.ops.mytorch, "gelu"), reason="the extension is not built")
def test_recipe_adds_an_op_that_the_coverage_tests_see(tmp_path):
    scratch = tmp_path / "repo"
    scratch_copy(scratch)
    gpu = torch.cuda.is_available()

    append(scratch / step_path("mytorch_ext/ops/"), SCHEMA_AND_KERNELS + PYTHON_STEP)
    before = run_coverage(scratch, tmp_path, "before")
    for path, (coverage, _) in COVERAGE.items():
        if "cuda" in path and not gpu:
            continue
        if "cuda" in path:  # the op has a CUDA kernel: the CUDA check is satisfied without an entry
            assert before.get(coverage, ("?",))[0] == "passed", (coverage, before.get(coverage))
            continue
        outcome, text = before.get(coverage, ("not run", ""))
        assert outcome == "failed" and OP in text, \
            f"{path}::{coverage} does not see mytorch::{OP} without its entry ({outcome}): {text[:500]}"

    append(scratch / step_path("tests/opinfo.py"), ENTRY)
    after = run_coverage(scratch, tmp_path, "after")
    failed = {k: v[1][:800] for k, v in after.items() if v[0] == "failed"}
    assert not failed, f"with its entry, mytorch::{OP} still fails: {failed}"
    for path, cases in COVERAGE.items():
        for case in cases:
            expected = ("passed", "skipped") if "cuda" in path and not gpu else ("passed",)
            assert after.get(case, ("not run",))[0] in expected, (path, case, after.get(case))
