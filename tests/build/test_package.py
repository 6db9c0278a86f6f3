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
