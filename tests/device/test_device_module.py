"""torch.mytorch: availability, device count, current device, device(...), synchronize."""
import pytest
import torch

import mytorch_ext  # noqa: F401


def test_registered_as_torch_mytorch():
    assert torch.mytorch is mytorch_ext.device
    assert torch.mytorch.is_available()


def test_default_device_count_is_two():
    assert torch.mytorch.device_count() == 2


def test_device_count_from_env(run_ok):
    out = run_ok("import torch, mytorch_ext; print(torch.mytorch.device_count()); "
                 "print(torch.ones(1, device='mytorch:2').device)", MYTORCH_DEVICE_COUNT=3)
    assert out.split("\n")[:2] == ["3", "mytorch:2"]


def test_bad_device_count_env(run):
    r = run("import torch, mytorch_ext; torch.mytorch.device_count()", MYTORCH_DEVICE_COUNT="zero")
    assert r.returncode != 0
    assert "MYTORCH_DEVICE_COUNT must be an integer in [1, 64], got 'zero'" in r.stderr


def test_set_device_and_current_device():
    assert torch.mytorch.current_device() == 0
    torch.mytorch.set_device(1)
    assert torch.mytorch.current_device() == 1
    assert torch.empty(1, device="mytorch").device == torch.device("mytorch:1")
    torch.mytorch.set_device("mytorch:0")
    assert torch.mytorch.current_device() == 0


def test_device_context_manager_restores():
    with torch.mytorch.device(1):
        assert torch.mytorch.current_device() == 1
        assert torch.zeros(2, device="mytorch").device.index == 1
        with torch.mytorch.device("mytorch:0"):
            assert torch.mytorch.current_device() == 0
        assert torch.mytorch.current_device() == 1
    assert torch.mytorch.current_device() == 0


def test_device_context_manager_restores_on_error():
    with pytest.raises(ValueError):
        with torch.mytorch.device(1):
            raise ValueError("boom")
    assert torch.mytorch.current_device() == 0


def test_synchronize():
    torch.mytorch.synchronize()
    torch.mytorch.synchronize(1)
    torch.mytorch.synchronize("mytorch:1")
    with pytest.raises(RuntimeError, match="invalid device index 5"):
        torch.mytorch.synchronize(5)


def test_current_device_is_per_thread():
    import threading

    torch.mytorch.set_device(1)
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.mytorch.current_device()))
    t.start()
    t.join()
    assert seen == [0] and torch.mytorch.current_device() == 1
