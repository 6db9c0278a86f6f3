"""Every mytorch:: op runs on CUDA through a CUDA kernel of ours.

For each op, the fixed samples of its entry in tests/opinfo.py (the CPU opcheck samples) are
moved to the GPU: the CUDA result must match the CPU kernel's result (which the op-family
tests compare with ATen) within the entry's `cuda_tol`, gradients included, and opcheck must
pass on CUDA. An entry marked `random` is compared by structure, not value. The registered
op list is the registry, so a new op without a CUDA kernel fails here."""
import pytest
import torch

from helpers import flat_tensors, map_tensors
from opinfo import OPS, registered_ops

pytestmark = pytest.mark.gpu
M = torch.ops.mytorch
SAMPLED = sorted(n for n, e in OPS.items() if e.samples is not None)


def to_cuda(x):
    return map_tensors(lambda t: t.detach().to("cuda").requires_grad_(t.requires_grad), x)


def clone_args(x):
    return map_tensors(lambda t: t.detach().clone().requires_grad_(t.requires_grad), x)


def entry_and_op(name):
    """The op's registry entry and its kernel; a skip where the entry says CUDA cannot run it."""
    entry = OPS[name]
    if entry.cuda_skip:
        pytest.skip(entry.cuda_skip)
    return entry, getattr(M, name).default


def close(a, b, what, tol):
    assert a.device.type == "cuda", f"{what}: result on {a.device}, expected cuda"
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
    if a.dtype.is_floating_point:
        rtol, atol = tol
        torch.testing.assert_close(a.cpu(), b, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(a.cpu(), b), f"{what}: values differ"


def test_every_op_has_a_cuda_kernel():
    missing = [n for n in registered_ops()
               if not torch._C._dispatch_has_kernel_for_dispatch_key(f"mytorch::{n}", "CUDA")]
    assert not missing, f"mytorch:: ops with no CUDA kernel: {missing}"


@pytest.mark.parametrize("name", SAMPLED)
def test_cuda_matches_cpu(name):
    entry, op = entry_and_op(name)
    for args, kwargs in entry.samples():
        args_cpu, kwargs_cpu = clone_args(args), clone_args(kwargs)
        args_gpu, kwargs_gpu = to_cuda(args), to_cuda(kwargs)
        out_cpu = op(*args_cpu, **kwargs_cpu)
        out_gpu = op(*args_gpu, **kwargs_gpu)
        outs_cpu, outs_gpu = flat_tensors(out_cpu), flat_tensors(out_gpu)
        assert len(outs_cpu) == len(outs_gpu)
        if name.endswith("_"):  # in-place steps: compare the updated inputs
            outs_cpu, outs_gpu = flat_tensors(args_cpu), flat_tensors(args_gpu)
        if entry.random:
            x = args_cpu[0]
            y = outs_gpu[0].cpu()
            kept = y != 0
            p = args[1]
            torch.testing.assert_close(y[kept], (x.detach() / (1 - p))[kept])
            frac = kept.float().mean().item()
            assert 0.1 < frac < 0.95, f"dropout kept {frac:.2f} of the elements at p={p}"
            continue
        for i, (a, b) in enumerate(zip(outs_gpu, outs_cpu)):
            close(a, b, f"{name} output {i}", entry.cuda_tol)
        # gradients of every float output that needs them
        diff = [(a, b) for a, b in zip(outs_gpu, outs_cpu) if a.requires_grad and b.requires_grad]
        if diff:
            grads = [torch.randn_like(b) for _, b in diff]
            ins_cpu = [t for t in flat_tensors((args_cpu, kwargs_cpu)) if t.requires_grad]
            ins_gpu = [t for t in flat_tensors((args_gpu, kwargs_gpu)) if t.requires_grad]
            g_cpu = torch.autograd.grad([b for _, b in diff], ins_cpu, grads, allow_unused=True)
            g_gpu = torch.autograd.grad([a for a, _ in diff], ins_gpu, [g.cuda() for g in grads],
                                        allow_unused=True)
            for i, (a, b) in enumerate(zip(g_gpu, g_cpu)):
                if b is None:
                    assert a is None, f"{name} grad {i}: CUDA has a gradient, CPU has none"
                else:
                    close(a, b, f"{name} grad {i}", entry.cuda_tol)


@pytest.mark.parametrize("name", SAMPLED)
def test_opcheck_cuda(name):
    entry, op = entry_and_op(name)
    for args, kwargs in entry.samples():
        torch.library.opcheck(op, to_cuda(args), to_cuda(kwargs))
