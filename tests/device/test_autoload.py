"""Autoload: the `torch.backends` entry point in pyproject.toml makes `import torch` load the
mytorch device without `import mytorch_ext`; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off.

The entry point is exercised through a distribution's metadata written from the
pyproject.toml table, so the test holds whether or not the installed metadata is current."""
import os
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def entry_point():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        table = tomllib.load(f)["project"]["entry-points"]["torch.backends"]
    assert table == {"mytorch": "mytorch_ext._autoload:load"}
    return table


@pytest.fixture
def autoload_path(tmp_path):
    dist = tmp_path / "mytorch_autoload_check-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mytorch-autoload-check\n"
                                   "Version: 0.0\n")
    lines = ["[torch.backends]"] + [f"{k} = {v}" for k, v in entry_point().items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return os.pathsep.join([str(tmp_path), ROOT, os.path.join(ROOT, "python")])


PROBE = (
    "import sys, torch\n"
    "x = torch.ones(3, device='mytorch') * 2\n"
    "print(x.device, float(x.sum().cpu()), 'mytorch_ext' in sys.modules)\n")


def test_import_torch_loads_the_device(run_ok, autoload_path):
    out = run_ok(PROBE, PYTHONPATH=autoload_path, MYTORCH_DEVICE="1")
    assert out.split() == ["mytorch:0", "6.0", "True"]


def test_env_switch_turns_autoload_off(run, autoload_path):
    r = run(PROBE, PYTHONPATH=autoload_path, MYTORCH_DEVICE="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode != 0
    assert "mytorch" in r.stderr and "Traceback" in r.stderr
    r = run("import sys, torch; print('mytorch_ext' in sys.modules)", PYTHONPATH=autoload_path,
            TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.stdout.split() == ["False"]


def test_spawned_workers_get_the_device(run_ok, autoload_path):
    code = (
        "import torch, torch.multiprocessing as mp\n"
        "def work(q):\n"
        "    q.put(float((torch.arange(4.0, device='mytorch') + 1).sum().cpu()))\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('spawn')\n"
        "    q = ctx.Queue()\n"
        "    p = ctx.Process(target=work, args=(q,))\n"
        "    p.start(); print(q.get(timeout=60)); p.join()\n")
    path = os.path.join(os.path.dirname(autoload_path.split(os.pathsep)[0]), "spawn_probe.py")
    with open(path, "w") as f:
        f.write(code)
    out = run_ok(f"import runpy; runpy.run_path({path!r}, run_name='__main__')",
                 PYTHONPATH=autoload_path, MYTORCH_DEVICE="1")
    assert out.split() == ["10.0"]


def test_unbuilt_or_disabled_device_never_breaks_import_torch(run_ok, autoload_path):
    out = run_ok("import torch; print(hasattr(torch, 'mytorch'))", PYTHONPATH=autoload_path,
                 MYTORCH_DEVICE="0")
    assert out.split() == ["False"]
