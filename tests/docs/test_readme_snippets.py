"""Every ```python block of README.md runs as written (each in a fresh interpreter)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M)


def _line_of(block: str) -> int:
    return README[:README.index(block)].count("\n") + 1


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{_line_of(b)}" for b in BLOCKS])
def test_snippet_runs(block, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    env["CUDA_VISIBLE_DEVICES"] = ""  # the snippets are meant to run on any machine's CPU
    script = tmp_path / "snippet.py"
    script.write_text(block)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"README.md:{_line_of(block)} failed:\n{r.stderr[-3000:]}"
