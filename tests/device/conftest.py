import gc
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for start-up settings read from the environment)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "python")])
    full_env.update({k: str(v) for k, v in env.items()})
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                          text=True, timeout=120)


def run_python_ok(code: str, **env) -> str:
    """run_python that must exit with status 0 (else the end of stderr shows); its stdout."""
    r = run_python(code, **env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.fixture
def run():
    return run_python


@pytest.fixture
def run_ok():
    return run_python_ok


@pytest.fixture
def free_compiled_state():
    """Compiled graphs and their caches hold device tensors in reference cycles: free them
    after the test, so that a later test's gc.collect() does not change the device's memory
    statistics under it."""
    yield
    import torch

    torch._dynamo.reset()
    gc.collect()


@pytest.fixture(autouse=True)
def _device_state():
    """Every test starts on mytorch:0 with the default fallback mode and no memory cap."""
    import torch

    import mytorch_ext

    torch.mytorch.set_device(0)
    mode = mytorch_ext.fallback_mode()
    yield
    torch.mytorch.set_device(0)
    mytorch_ext.set_fallback_mode(mode)
    for i in range(torch.mytorch.device_count()):
        torch.mytorch.set_memory_limit(0, i)
