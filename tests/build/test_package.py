"""The package: import, build_info, version, and clear messages for missing pieces."""
import subprocess
import sys

import torch

import mytorch_ext


def test_build_info_reports_what_was_compiled():
    info = mytorch_ext.build_info()
    for key in ("cuda", "cuda_archs", "cpu_flags", "openmp", "omp_max_threads", "triton", "torch"):
        assert key in info, key
    assert info["openmp"] > 0, "the CPU kernels must be built with OpenMP"
    assert info["omp_max_threads"] >= 1
    assert info["torch"] == torch.__version__
    if info["cuda"]:
        assert info["cuda_archs"], "a CUDA build must name its archs"


def test_version_command():
    out = subprocess.run([sys.executable, "-m", "mytorch_ext", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"mytorch_ext {mytorch_ext.__version__}"


def test_schemas_registered():
    assert hasattr(torch.ops.mytorch, "gelu")
    assert "approximate" in str(torch.ops.mytorch.gelu.default._schema)


def test_require_triton_message(monkeypatch):
    from mytorch_ext import _info

    _info._triton_status.cache_clear()
    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` fail
    try:
        try:
            _info.require_triton("mytorch::flash_attn")
        except RuntimeError as e:
            msg = str(e)
        else:
            raise AssertionError("require_triton did not raise without Triton")
        assert msg.startswith("mytorch::flash_attn: needs Triton. Triton is not installed")
        assert "\n" not in msg
    finally:
        _info._triton_status.cache_clear()


def _load_setup():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "setup.py")
    spec = importlib.util.spec_from_file_location("mytorch_setup", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # main() runs only as a script
    return module


def test_cuda_required_without_nvcc_fails_in_one_line(monkeypatch, capsys):
    setup = _load_setup()
    monkeypatch.setattr(setup, "_find_nvcc", lambda: None)
    monkeypatch.setenv("MYTORCH_CUDA", "1")
    try:
        setup._want_cuda(torch)
    except SystemExit as e:
        assert e.code == 1
    else:
        raise AssertionError("MYTORCH_CUDA=1 without nvcc did not fail")
    err = capsys.readouterr().err
    assert err == ("mytorch build: MYTORCH_CUDA=1 but no nvcc was found (set CUDA_HOME or put "
                   "nvcc on PATH)\n")
    monkeypatch.setenv("MYTORCH_CUDA", "0")
    assert setup._want_cuda(torch) == (False, None)


def test_import_without_the_native_library_explains_in_one_line():
    code = ("import sys; sys.modules['mytorch_ext._C'] = None\n"
            "import mytorch_ext\n"
            "print(mytorch_ext.triton_available() in (True, False))\n"
            "try:\n    mytorch_ext.patch\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "True"
    assert len(lines) == 2 and lines[1].startswith(
        "mytorch_ext: the native library mytorch_ext._C is not built")
    assert "make build" in lines[1]
