"""Packaging: what the sdist carries, the build knobs of setup.py, the project metadata, the
tuned-table loader and the mytorch-bench entry point."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import tarfile
import tomllib
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _setup_module():
    spec = importlib.util.spec_from_file_location("mytorch_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # main() runs only under __main__
    return mod


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdist")
    r = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(out),
                        "sdist", "-d", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={**os.environ, "MYTORCH_CUDA": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    (path,) = out.glob("mytorch-*.tar.gz")
    with tarfile.open(path) as tf:
        return {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}


def test_sdist_carries_every_source_and_header(sdist):
    tracked = subprocess.run(["git", "ls-files", "csrc"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    on_disk = [str(p.relative_to(ROOT)) for p in (ROOT / "csrc").rglob("*") if p.is_file()]
    wanted = set(tracked) | set(on_disk)
    assert any(f.endswith(".cuh") for f in wanted) and "csrc/precompiled.h" in wanted
    assert sorted(wanted - sdist) == []


def test_sdist_carries_license_data_and_build_files(sdist):
    for f in ["LICENSE", "README.md", "setup.py", "pyproject.toml", "MANIFEST.in",
              "mytorch_ext/triton/flash_attn_tuned.json"]:
        assert f in sdist, f


def test_sdist_carries_the_bench_suites(sdist):
    suites = {str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.py")}
    assert "benchmarks/cli.py" in suites and "benchmarks/suites/attention.py" in suites
    assert sorted(suites - sdist) == []


def test_wheel_packages_leave_the_bench_suites_out():
    """The wheel holds mytorch_ext and mytorch only: benchmarks/ stays in the checkout."""
    import fnmatch

    found = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    for name in ("mytorch_ext", "mytorch_ext.triton", "mytorch"):
        assert any(fnmatch.fnmatch(name, pat) for pat in found["include"]), name
    for name in ("benchmarks", "benchmarks.suites"):
        assert not any(fnmatch.fnmatch(name, pat) for pat in found["include"]), name
    assert not (ROOT / "mytorch_ext" / "bench").exists()


def test_metadata():
    assert not any(r.split()[0].startswith("torch") for r in PYPROJECT["build-system"]["requires"])
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").is_file()
    assert project["scripts"]["mytorch-bench"] == "mytorch_ext.__main__:bench_main"
    assert "*.json" in PYPROJECT["tool"]["setuptools"]["package-data"]["mytorch_ext.triton"]


def test_bench_script_is_the_bench_cli(capsys):
    from mytorch_ext.__main__ import bench_main

    with pytest.raises(SystemExit) as e:
        bench_main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m mytorch_ext bench") and "--quick" in out


def test_bench_without_the_suites_says_where_they_live(capsys, monkeypatch):
    """A wheel install has no benchmarks/ folder: one line on stderr, a non-zero exit."""
    from mytorch_ext import _bench
    from mytorch_ext.__main__ import bench_main, main

    monkeypatch.setattr(_bench, "find", lambda: None)
    for run in (lambda: bench_main(["--help"]), lambda: main(["bench", "cpu", "--quick"])):
        assert run() == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert err.startswith("mytorch_ext bench: the bench suites live in the benchmarks/ folder "
                              "of a mytorch source checkout"), err


def test_bench_finds_the_checkout_suites():
    from mytorch_ext import _bench

    assert _bench.find() == str(ROOT / "benchmarks")
    assert os.path.realpath(_bench.load().__file__) == str((ROOT / "benchmarks" / "__init__.py").resolve())


def test_cpu_flags_default_is_portable(monkeypatch):
    setup = _setup_module()
    monkeypatch.delenv("MYTORCH_CPU_FLAGS", raising=False)
    monkeypatch.setattr(setup.platform, "machine", lambda: "x86_64")
    assert setup._cpu_flags() == ["-march=x86-64-v2"]
    monkeypatch.setenv("MYTORCH_CPU_FLAGS", "native")
    assert setup._cpu_flags() == ["-march=native"]
    monkeypatch.setenv("MYTORCH_CPU_FLAGS", "none")
    assert setup._cpu_flags() == []
    monkeypatch.delenv("MYTORCH_CPU_FLAGS")
    monkeypatch.setattr(setup.platform, "machine", lambda: "aarch64")
    assert setup._cpu_flags() == []


def test_cuda_auto_needs_a_gpu(monkeypatch):
    setup = _setup_module()

    class FakeTorch:
        __version__ = "2.99+cu130"

        class version:
            cuda = "13.0"

    monkeypatch.setattr(setup, "_find_nvcc", lambda: "/opt/cuda")
    monkeypatch.setattr(setup, "_gpu_visible", lambda torch: False)
    monkeypatch.setenv("MYTORCH_CUDA", "auto")
    on, home, why = setup._want_cuda(FakeTorch)
    assert not on and "no GPU visible" in why and "MYTORCH_CUDA=1" in why
    monkeypatch.setenv("MYTORCH_CUDA", "1")
    assert setup._want_cuda(FakeTorch)[:2] == (True, "/opt/cuda")
    monkeypatch.setattr(setup, "_gpu_visible", lambda torch: True)
    monkeypatch.setenv("MYTORCH_CUDA", "auto")
    assert setup._want_cuda(FakeTorch)[0]
    monkeypatch.setenv("MYTORCH_CUDA", "yes")
    with pytest.raises(SystemExit):
        setup._want_cuda(FakeTorch)


def test_missing_tuned_table_warns(monkeypatch, tmp_path):
    pytest.importorskip("triton")
    from mytorch_ext.triton import flash_attn_config as cfg

    assert cfg._load(cfg.TABLE_PATH, required=True), "the shipped table is empty"
    monkeypatch.setattr(cfg, "TABLE_PATH", str(tmp_path / "gone.json"))
    monkeypatch.setattr(cfg, "_table", None)
    with pytest.warns(RuntimeWarning, match="tuned FlashAttention table .*gone.json is missing"):
        table, _ = cfg._tables()
    assert table == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.warns(RuntimeWarning, match="cannot read"):
        assert cfg._load(str(bad), required=False) == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cfg._load(str(tmp_path / "no-cache.json"), required=False) == {}
