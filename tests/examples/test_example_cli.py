"""Every example takes --help (and then runs nothing) and --out DIR, and writes only there."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    return env


def _files(d: pathlib.Path) -> set:
    return {p for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_examples_found():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_help_runs_nothing(example, tmp_path):
    before = _files(ROOT / "examples")
    r = subprocess.run([sys.executable, str(example), "--help"], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("usage:"), r.stdout[:500]
    assert "--out DIR" in r.stdout
    assert not list(tmp_path.iterdir()), "--help wrote files"
    assert _files(ROOT / "examples") == before, "--help wrote into examples/"


def test_out_dir_holds_every_file(tmp_path):
    """A short run of an example that writes a file: it lands in --out, nowhere else."""
    before = _files(ROOT / "examples")
    work, out = tmp_path / "cwd", tmp_path / "results"
    work.mkdir()
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "standalone_digits_mlp.py"),
                        "--epochs", "1", "--out", str(out)],
                       cwd=work, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [p.name for p in out.iterdir()] == ["standalone_digits_mlp.png"]
    assert not list(work.iterdir())
    assert _files(ROOT / "examples") == before
    assert not (ROOT / "examples" / "out").exists()

