"""A process whose last act is a backward on the device exits cleanly.

autograd runs device work on its own threads; a graph task they release after the
interpreter starts to finalize used to abort the process at exit, about half the time."""
import subprocess
import sys

SCRIPT = """
import torch, mytorch_ext
x = torch.randn(5, device="mytorch", requires_grad=True)
(x * 2).exp().sum().backward()
e = torch.zeros(0, device="mytorch:1", requires_grad=True)
e.sum().backward()
"""


def test_exit_right_after_a_device_backward_is_clean():
    codes = [subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
             for _ in range(6)]
    failures = [(c.returncode, c.stderr[-300:]) for c in codes if c.returncode != 0]
    assert failures == []
