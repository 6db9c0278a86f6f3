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


@pytest.fixture
def run():
    return run_python


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
