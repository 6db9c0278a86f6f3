"""Fork poisoning, as on CUDA: a child forked after the parent initialized the device
cannot initialize it (a clear error); a child forked before can."""
SCRIPT = r"""
import os, sys, torch, mytorch_ext
init_first = sys.argv[1] == "1"
if init_first:
    torch.ones(2, device="mytorch")
assert torch.mytorch.is_initialized() == init_first
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    try:
        msg = "bad_fork=%s " % torch.mytorch._is_in_bad_fork()
        y = torch.ones(3, device="mytorch") * 2
        msg += "ok %s" % float(y.sum().cpu())
    except RuntimeError as e:
        msg += "error " + str(e)
    os.write(w, msg.encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
print(os.read(r, 4096).decode())
# the parent is unaffected
print("parent", float(torch.ones(2, device="mytorch").sum().cpu()), torch.mytorch._is_in_bad_fork())
"""


def test_child_forked_after_init_gets_a_clear_error(run_ok):
    out = run_ok("import sys; sys.argv = ['x', '1']\n" + SCRIPT)
    child, parent = out.strip().splitlines()
    assert child.startswith("bad_fork=True error Cannot re-initialize the mytorch device in a "
                            "forked subprocess"), child
    assert "'spawn' start method" in child
    assert parent == "parent 2.0 False"


def test_child_forked_before_init_uses_the_device(run_ok):
    out = run_ok("import sys; sys.argv = ['x', '0']\n" + SCRIPT)
    child, parent = out.strip().splitlines()
    assert child == "bad_fork=False ok 6.0"
    assert parent == "parent 2.0 False"


def test_init_in_bad_fork_raises(run_ok):
    code = (
        "import os, torch, mytorch_ext\n"
        "torch.mytorch.init()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        torch.mytorch.init()\n"
        "        os._exit(3)\n"
        "    except RuntimeError as e:\n"
        "        os._exit(7 if 'forked subprocess' in str(e) else 4)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n")
    out = run_ok(code)
    assert out.split() == ["7"]


def test_manual_seed_in_bad_fork_does_not_raise(run_ok):
    """torch.manual_seed in a forked DataLoader worker skips the poisoned device."""
    code = (
        "import os, torch, mytorch_ext\n"
        "torch.ones(1, device='mytorch')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    torch.manual_seed(3)\n"
        "    os._exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n")
    out = run_ok(code)
    assert out.split() == ["0"]
