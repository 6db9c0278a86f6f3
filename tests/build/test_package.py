"""The package: import, build_info, version, and clear messages for missing pieces."""
import os
import subprocess
import sys

import pytest
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
    assert setup._want_cuda(torch) == (False, None, "MYTORCH_CUDA=0")


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


def _cuobjdump():
    import shutil

    cands = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump"),
             shutil.which("cuobjdump") or ""]
    try:
        import triton

        cands.append(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))
    except ImportError:
        pass
    return next((c for c in cands if c and os.path.exists(c)), None)


def test_cuda_code_is_built_for_the_requested_archs():
    """Each arch of the build's list has machine code in _C (and +PTX its PTX): the arch
    flags must reach nvcc, not be dropped in favour of nvcc's default target."""
    info = mytorch_ext.build_info()
    if not info["cuda"]:
        pytest.skip("this build has no CUDA code")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump to read the CUDA code with")
    so = mytorch_ext._C.__file__
    elf = subprocess.run([tool, "--list-elf", so], capture_output=True, text=True).stdout
    ptx = subprocess.run([tool, "--list-ptx", so], capture_output=True, text=True).stdout
    for arch in info["cuda_archs"].replace(";", " ").split():
        num = arch.split("+")[0].replace(".", "")
        assert f"sm_{num}" in elf, f"no sm_{num} machine code in {so} (archs {info['cuda_archs']!r})"
        if arch.endswith("+PTX"):
            # cuobjdump names PTX compute_XX (CUDA 12) or <file>.sm_XX.ptx (CUDA 13)
            assert f"compute_{num}" in ptx or f".sm_{num}.ptx" in ptx, f"no compute_{num} PTX in {so}"
