import os

# Without a GPU the Triton kernels run under the interpreter; it must be on before anything
# imports triton, and `import torch` itself may import mytorch_ext (the device's entry point).
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import mytorch_ext  # noqa: E402,F401  registers the ops and the device


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--runslow"):
        skip = pytest.mark.skip(reason="slow: run with --runslow (make test-slow)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)
    if not hasattr(torch, "mytorch"):
        skip = pytest.mark.skip(reason="the mytorch device is not registered in this process "
                                       "(a CUDA GPU is present; set MYTORCH_DEVICE=1 to test it)")
        for item in items:
            if "tests/device/" in str(item.fspath) or "mytorch" in item.name.split("[")[-1]:
                item.add_marker(skip)
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


def pytest_runtest_logreport(report):
    """MYTORCH_FAIL_LOG=path: append each failure's report as it happens (for runs that may be
    cut off before pytest's own summary)."""
    path = os.environ.get("MYTORCH_FAIL_LOG")
    if path and report.failed:
        with open(path, "a") as f:
            f.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext[-6000:]}\n")
