"""CUDA-only checks of the fused kernels: large and odd sizes (rows not a multiple
of the block, widths not a multiple of the vector width, rows too wide for the
register path), misaligned storage (scalar path), 64-bit indexing past 2^31
elements, and many-tensor optimizer steps; and the CUDA kernels of the canonical
layer_norm / rms_norm / softmax / log_softmax schemas (ATen parity on CUDA, the
statistics contract of the CPU kernels, opcheck). The shared ATen-parity tests in
tests/ops/test_{activation,rope,loss,optim}.py also run on CUDA when a GPU is present."""
import pytest
import torch
import torch.nn.functional as F

from helpers import assert_close
from mytorch_ext.ops.activation import bias_gelu, swiglu
from mytorch_ext.ops.loss import fused_cross_entropy, fused_linear_cross_entropy
from mytorch_ext.ops.norm import layer_norm, rms_norm
from mytorch_ext.ops.optim import adam_step_
from mytorch_ext.ops.rope import rope
from mytorch_ext.ops.softmax import log_softmax, softmax

ops = torch.ops.mytorch

pytestmark = pytest.mark.gpu
DEV = "cuda"


def rel_err(a, b, floor=1e-30):
    """||a - b|| / ||b||; `floor` bounds the denominator where the exact answer is ~0."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(floor)).item()


def misaligned(shape, dtype):
    """Contiguous but 2 bytes off a 16-byte boundary: forces the scalar path."""
    n = 1
    for s in shape:
        n *= s
    base = torch.randn(n + 1, device=DEV, dtype=torch.float32).to(dtype)
    return base[1:].view(shape)


# widths: odd, not a multiple of 8, one-row-per-block forwards with part of the last vectors
# idle (1032) and at their widest (bf16 16384), past them (24576: the persistent kernels), one
# that leaves the register path (bf16 > 65536 fwd, > 32768 bwd); narrow rows, several to a
# backward block, their count not a multiple of the block's (1001 x 256)
SHAPES = [(4099, 4096), (4097, 1032), (1000, 4095), (257, 16384), (65, 24576), (3, 131072 + 8), (5, 40000),
          (33, 1), (1001, 256)]


def fwd_bwd(fn, ref, inputs, tol):
    xs = [t.detach().clone().requires_grad_() for t in inputs]
    rs = [t.detach().float().requires_grad_() for t in inputs]
    y, r = fn(*xs), ref(*rs)
    assert torch.isfinite(y.float()).all()
    assert rel_err(y, r) < tol, rel_err(y, r)
    g = torch.randn_like(r)
    y.backward(g.to(y.dtype))
    r.backward(g)
    for a, b in zip(xs, rs):
        # A width-1 norm has an exactly-zero input gradient: measure against ||g|| there.
        err = rel_err(a.grad, b.grad, floor=g.norm().item())
        assert err < tol, (a.shape, err)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_norms_large(shape, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    n, d = shape
    x = torch.randn(shape, device=DEV, dtype=dtype)
    w = torch.randn(d, device=DEV, dtype=dtype)
    b = torch.randn(d, device=DEV, dtype=dtype)
    fwd_bwd(lambda x, w: rms_norm(x, d, w, 1e-6), lambda x, w: F.rms_norm(x, (d,), w, 1e-6), [x, w], tol)
    fwd_bwd(lambda x, w, b: layer_norm(x, d, w, b), lambda x, w, b: F.layer_norm(x, (d,), w, b), [x, w, b], tol)


@pytest.mark.parametrize("cols", [4096, 8192, 40000])  # one row per block, streamed
def test_layer_norm_large_mean_and_outliers(cols):
    """A large mean, one huge channel or a tiny spread: float32 LayerNorm as accurate as ATen's."""
    x = torch.randn(6, cols, device=DEV, dtype=torch.float64) + 1e4
    x[1, 0] = 1e6  # one massive channel, first in the row
    x[2, -1] = -1e6  # and last
    x[3] = x[3] * 1e-3  # a tiny spread about a large mean
    xf = x.float()
    for r in range(x.shape[0]):
        ref = F.layer_norm(xf[r].double(), (cols,))
        mine, aten = rel_err(layer_norm(xf[r:r + 1], cols)[0], ref), rel_err(F.layer_norm(xf[r], (cols,)), ref)
        assert mine <= 2 * aten + 1e-6, (r, mine, aten)


# Norm rows wider than a block holds (a cluster of 2-8 blocks a row on sm_90+): more rows than
# the backward's clusters (each walks several rows, its staging and posted sums alternating),
# slices of unequal length (40000), the widest cluster (131072 bf16: 8 blocks of 2048 vectors),
# without a weight or bias.
WIDE = [(700, 24576), (301, 65536), (97, 40000), (33, 131072)]


@pytest.mark.parametrize("shape", WIDE)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_norms_wide_rows(shape, dtype):
    torch.manual_seed(0)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    n, d = shape
    x = torch.randn(shape, device=DEV, dtype=dtype) * 2 + 0.5
    w = torch.randn(d, device=DEV, dtype=dtype)
    b = torch.randn(d, device=DEV, dtype=dtype)
    fwd_bwd(lambda x, w: rms_norm(x, d, w, 1e-6), lambda x, w: F.rms_norm(x, (d,), w, 1e-6), [x, w], tol)
    fwd_bwd(lambda x, w, b: layer_norm(x, d, w, b), lambda x, w, b: F.layer_norm(x, (d,), w, b), [x, w, b], tol)
    # no weight: dx and the always-returned weight/bias gradients against fp32 autograd
    g = torch.randn_like(x)
    out, mean, rstd = ops.layer_norm(x, [d], None, None, 1e-5)
    dx, dw, db = ops.layer_norm_backward(g, x, [d], mean, rstd, None)
    xr = x.float().requires_grad_()
    y = F.layer_norm(xr, (d,), eps=1e-5)
    y.backward(g.float())
    assert rel_err(out, y) < tol
    assert rel_err(mean.view(-1), x.float().mean(-1)) < 1e-5
    assert rel_err(dx, xr.grad) < tol
    assert rel_err(dw, (g.float() * y.detach()).sum(0)) < tol
    assert rel_err(db, g.float().sum(0)) < tol


# row-forward forms: a warp a row (<= 512 bf16 columns), one block a row with every thread full
# at 4 vectors (1024, 4096) or 3 (768, 1536; fp32 768), or with bounds (1032)
ROW_WIDTHS = [256, 768, 1024, 1032, 1536, 4096]


@pytest.mark.parametrize("cols", ROW_WIDTHS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_norms_without_weight_or_bias(cols, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    x = torch.randn(37, cols, device=DEV, dtype=dtype)
    w = torch.randn(cols, device=DEV, dtype=dtype)
    for weight, bias in ((None, None), (w, None), (None, w)):
        ref = F.layer_norm(x.float(), (cols,), None if weight is None else weight.float(),
                           None if bias is None else bias.float())
        assert rel_err(layer_norm(x, cols, weight, bias), ref) < tol, (weight is None, bias is None)
    assert rel_err(rms_norm(x, cols), F.rms_norm(x.float(), (cols,))) < tol


# 16-bit LayerNorm at 1024 columns picks its form by row count: every row resident at once (w
# loaded early), more rows than that (w and b loaded after the reductions), x and y past the L2
# (64-thread rows); each without a weight or bias too, and about a large mean
@pytest.mark.parametrize("rows", [37, 8192, 16384])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layer_norm_16bit_forms_at_1024_columns(rows, dtype):
    torch.manual_seed(0)
    x = torch.randn(rows, 1024, device=DEV, dtype=dtype)
    w = torch.randn(1024, device=DEV, dtype=dtype)
    b = torch.randn(1024, device=DEV, dtype=dtype)
    for weight, bias in ((w, b), (None, None), (w, None), (None, b)):
        y, mean, rstd = ops.layer_norm(x, [1024], weight, bias, 1e-5)
        ref = F.layer_norm(x.float(), (1024,), None if weight is None else weight.float(),
                           None if bias is None else bias.float())
        assert rel_err(y, ref) < 1e-2, (weight is None, bias is None)
        assert rel_err(mean.view(-1), x.float().mean(-1)) < 1e-5
        assert rel_err(rstd.view(-1), torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)) < 1e-4
    x = (torch.randn(rows, 1024, device=DEV, dtype=torch.float64) * 0.5 + 300).to(dtype)
    ref = F.layer_norm(x.double(), (1024,))
    mine, aten = rel_err(layer_norm(x, 1024), ref), rel_err(F.layer_norm(x, (1024,)), ref)
    assert mine <= 1.5 * aten + 1e-4, (mine, aten)


@pytest.mark.parametrize("cols", ROW_WIDTHS + [24576, 65536])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layer_norm_16bit_large_mean(cols, dtype):
    """16-bit rows about a large mean (the plain two-pass statistics): as accurate as ATen's."""
    x = (torch.randn(8, cols, device=DEV, dtype=torch.float64) * 0.5 + 300).to(dtype)
    ref = F.layer_norm(x.double(), (cols,))
    mine, aten = rel_err(layer_norm(x, cols), ref), rel_err(F.layer_norm(x, (cols,)), ref)
    assert mine <= 1.5 * aten + 1e-4, (mine, aten)


@pytest.mark.parametrize("cols", ROW_WIDTHS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_layer_norm_backward_large_mean(cols, dtype):
    """Gradients of rows about a large mean: as accurate as ATen's (float64 reference)."""
    torch.manual_seed(0)
    x = (torch.randn(300, cols, device=DEV, dtype=torch.float64) * 0.5 + 300).to(dtype)
    w = torch.randn(cols, device=DEV, dtype=dtype)
    b = torch.randn(cols, device=DEV, dtype=dtype)
    g = torch.randn(300, cols, device=DEV, dtype=dtype)

    def grads(fn, *ts):
        ts = [t.detach().requires_grad_() for t in ts]
        return torch.autograd.grad(fn(*ts), ts, g.to(ts[0].dtype))

    ref = grads(lambda x, w, b: F.layer_norm(x, (cols,), w, b), x.double(), w.double(), b.double())
    mine = grads(lambda x, w, b: layer_norm(x, cols, w, b), x, w, b)
    aten = grads(lambda x, w, b: F.layer_norm(x, (cols,), w, b), x, w, b)
    slack = 1e-6 if dtype == torch.float32 else 1e-4
    for name, m, a, r in zip(("x", "weight", "bias"), mine, aten, ref):
        assert rel_err(m, r) <= 1.5 * rel_err(a, r) + slack, (name, rel_err(m, r), rel_err(a, r))


@pytest.mark.parametrize("cols", ROW_WIDTHS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_softmax_special_values(cols, dtype):
    """-inf (some or a whole row), +inf, NaN and large logits: the same as ATen, NaNs included."""
    x = torch.randn(6, cols, device=DEV, dtype=torch.float32) * 3
    x[0, : cols // 2] = -float("inf")
    x[1] = -float("inf")
    x[2, 3] = float("inf")
    x[3, 5] = float("nan")
    x[4] = x[4] * 1000
    x[5] = x[5] + 1e4 if dtype == torch.float32 else x[5] + 100
    x = x.to(dtype)
    for mine, ref in ((softmax, F.softmax), (log_softmax, F.log_softmax)):
        got, want = mine(x, -1).float(), ref(x.float(), -1)
        assert torch.equal(got.isnan(), want.isnan()), (mine.__name__, got.isnan().sum(), want.isnan().sum())
        fin = want.isfinite()
        assert torch.equal(got.isinf(), want.isinf())
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        assert rel_err(got[fin], want[fin]) < tol, mine.__name__


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_softmax_large(shape, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    x = torch.randn(shape, device=DEV, dtype=dtype) * 4
    fwd_bwd(lambda x: softmax(x, -1), lambda x: F.softmax(x, -1), [x], tol)
    fwd_bwd(lambda x: log_softmax(x, -1), lambda x: F.log_softmax(x, -1), [x], tol)


@pytest.mark.parametrize("shape", SHAPES[:3])
def test_activations_large(shape):
    a = torch.randn(shape, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(shape, device=DEV, dtype=torch.bfloat16)
    bias = torch.randn(shape[-1], device=DEV, dtype=torch.bfloat16)
    fwd_bwd(swiglu, lambda a, b: F.silu(a) * b, [a, b], 1e-2)
    fwd_bwd(lambda x, b: bias_gelu(x, b, "tanh"), lambda x, b: F.gelu(x + b, approximate="tanh"), [a, bias], 1e-2)


def test_misaligned_scalar_path():
    for dtype in (torch.bfloat16, torch.float32):
        x = misaligned((37, 512), dtype)
        w = torch.randn(512, device=DEV, dtype=dtype)
        assert x.data_ptr() % 16 != 0
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        assert rel_err(rms_norm(x, 512, w), F.rms_norm(x.float(), (512,), w.float())) < tol
        assert rel_err(softmax(x, -1), F.softmax(x.float(), -1)) < tol
        y = misaligned((37, 512), dtype)
        assert rel_err(swiglu(x, y), F.silu(x.float()) * y.float()) < tol
        t = torch.randint(0, 512, (37,), device=DEV)
        assert rel_err(fused_cross_entropy(x, t), F.cross_entropy(x.float(), t)) < tol


@pytest.mark.parametrize("vocab", [128256, 32001])
def test_cross_entropy_large_vocab(vocab):
    x = torch.randn(301, vocab, device=DEV, dtype=torch.bfloat16) * 3
    t = torch.randint(0, vocab, (301,), device=DEV)
    t[::7] = -100
    for sm in (0.0, 0.1):
        fwd_bwd(lambda x: fused_cross_entropy(x, t, -100, sm), lambda x: F.cross_entropy(x, t, label_smoothing=sm),
                [x], 1e-2)


# The one-pass kernel's forms: rows of 16-byte vectors up to 64 KB one row per block (bf16
# 32000); longer ones on sm_90+ streamed through clusters of 2-8 blocks (bf16 128256: 4 blocks;
# fp32 32000: 2), one row per block elsewhere; rows of scalars on sm_90+ split over clusters of
# blocks, each slice held in shared memory (bf16 200003: 6 blocks; fp32 50257: 3; fp16 1001: 1),
# past 8 slices one row per block (bf16 400003). Targets on the first and last column and around
# each slice edge (the owner writes the loss), ignored rows.
@pytest.mark.parametrize("vocab,dtype", [(128256, torch.bfloat16), (32000, torch.float32), (32000, torch.bfloat16),
                                         (200003, torch.bfloat16),
                                         (50257, torch.float32), (1001, torch.float16), (400003, torch.bfloat16)])
def test_cross_entropy_grad_one_pass_forms(vocab, dtype):
    rows = 211
    x = torch.randn(rows, vocab, device=DEV, dtype=dtype) * 3
    t = torch.randint(0, vocab, (rows,), device=DEV)
    edges = [0, vocab - 1] + [vocab * k // d + o for d in range(2, 9) for k in range(1, d) for o in (-9, -1, 0, 8)]
    t[: len(edges)] = torch.tensor(edges, device=DEV)
    t[-5:] = -100
    xr = x.float().requires_grad_()
    for sm, reduction in ((0.0, "mean"), (0.1, "sum")):
        loss, grad = ops.fused_cross_entropy_grad(x, t, -100, sm, {"mean": 1, "sum": 2}[reduction])
        want = F.cross_entropy(xr, t, label_smoothing=sm, reduction=reduction)
        (want_grad,) = torch.autograd.grad(want, xr)
        assert loss.dtype == dtype and grad.dtype == dtype
        # the loss in dtype: up to half a unit in the last place (2^-8 of bf16, 2^-11 of fp16)
        loss_tol = {torch.bfloat16: 4e-3, torch.float16: 1e-3, torch.float32: 1e-5}[dtype]
        assert rel_err(loss, want) < loss_tol, (reduction, rel_err(loss, want))
        assert rel_err(grad, want_grad) < 1e-2, (reduction, rel_err(grad, want_grad))
        assert torch.equal(grad[-5:], torch.zeros_like(grad[-5:]))  # ignored rows: exact zeros
    # each edge row alone: its target logit came from the right block's slice
    per_row = F.cross_entropy(xr.detach(), t, reduction="none")
    for i in range(len(edges)):
        alone = ops.fused_cross_entropy_grad(x[i : i + 1], t[i : i + 1], -100, 0.0, 2)[0]
        assert abs(alone.item() - per_row[i].item()) <= 1e-2 * abs(per_row[i].item()), (i, t[i].item())


# The streamed form (sm_90+, 16-byte rows past 64 KB) over many rows, so each cluster walks
# several (the next row's chunks copied in while this one's gradient is written): equal and
# unequal slices (bf16 100008: 4 blocks of 3126, 3126, 3126, 3123 vectors), 3 blocks (fp16
# 70000), 8 blocks holding more than 64 KB each (bf16 600000), and rows too long for 8 blocks
# (fp32 600000: the block form). Every row's loss and gradient against fp32 autograd.
@pytest.mark.parametrize("rows,vocab,dtype", [(2000, 40000, torch.bfloat16), (1500, 100008, torch.bfloat16),
                                              (900, 70000, torch.float16), (700, 65536, torch.float32),
                                              (300, 600000, torch.bfloat16), (150, 600000, torch.float32)])
def test_cross_entropy_grad_streamed_rows(rows, vocab, dtype):
    x = torch.randn(rows, vocab, device=DEV, dtype=dtype) * 3
    t = torch.randint(0, vocab, (rows,), device=DEV)
    t[:4] = torch.tensor([0, vocab - 1, vocab // 2, vocab // 4 - 1], device=DEV)
    t[::13] = -100
    t[-1] = -100
    xr = x.float().requires_grad_()
    loss, grad = ops.fused_cross_entropy_grad(x, t, -100, 0.1, 2)
    want = F.cross_entropy(xr, t, label_smoothing=0.1, reduction="sum")
    (want_grad,) = torch.autograd.grad(want, xr)
    loss_tol = {torch.bfloat16: 4e-3, torch.float16: 1e-3, torch.float32: 1e-5}[dtype]
    assert rel_err(loss, want) < loss_tol
    row_err = ((grad.float() - want_grad).norm(dim=1) / want_grad.norm(dim=1).clamp_min(1e-30))
    kept = t != -100
    assert row_err[kept].max() < 1e-2, row_err[kept].argmax().item()
    assert torch.equal(grad[~kept], torch.zeros_like(grad[~kept]))  # ignored rows: exact zeros
    # the per-row losses (the owner of each target writes them) through the mean reduction
    mean_loss, _ = ops.fused_cross_entropy_grad(x, t, -100, 0.0, 1)
    assert rel_err(mean_loss, F.cross_entropy(xr.detach(), t)) < loss_tol


@pytest.mark.parametrize("vocab", [128256, 50257])  # the block form, the cluster form (sm_90+)
def test_cross_entropy_grad_masked_logits(vocab):
    # -inf logits (masked or padded vocabulary), whole vectors and a thread's whole first batch
    x = torch.randn(64, vocab, device=DEV, dtype=torch.bfloat16) * 3
    x[:, :4096] = float("-inf")
    x[:, -1000:] = float("-inf")
    x[::3, 5000:7000] = float("-inf")
    t = torch.randint(7000, vocab - 1000, (64,), device=DEV)
    xr = x.float().requires_grad_()
    want = F.cross_entropy(xr, t)
    (want_grad,) = torch.autograd.grad(want, xr)
    loss, grad = ops.fused_cross_entropy_grad(x, t, -100, 0.0, 1)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert rel_err(loss, want) < 2e-3 and rel_err(grad, want_grad) < 1e-2
    assert torch.equal(grad[:, :4096], torch.zeros_like(grad[:, :4096]))
    # the forward-only kernel and its backward (no gradient in the forward's pass)
    rows_loss, _ = ops.fused_cross_entropy(x, t, -100, 0.0, 0)
    assert torch.isfinite(rows_loss).all()
    assert rel_err(rows_loss, F.cross_entropy(xr.detach(), t, reduction="none")) < 4e-3


def test_fused_linear_cross_entropy_large():
    n, h, v = 1537, 512, 32000
    x = torch.randn(n, h, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(v, h, device=DEV, dtype=torch.bfloat16) / 16
    t = torch.randint(0, v, (n,), device=DEV)
    t[5] = -100
    fwd_bwd(lambda x, w: fused_linear_cross_entropy(x, w, t, chunk_size=500),
            lambda x, w: F.cross_entropy(x @ w.t(), t), [x, w], 2e-2)


# 16-byte rows (the block form; 40000: streamed on sm_90+, the gradient written over the logits)
# and the scalar path
@pytest.mark.parametrize("v", [32000, 40000, 32003])
def test_fused_linear_cross_entropy_label_smoothing_sum(v):
    n, h = 1001, 256
    x = torch.randn(n, h, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(v, h, device=DEV, dtype=torch.bfloat16) / 16
    t = torch.randint(0, v, (n,), device=DEV)
    t[::9] = -100
    fwd_bwd(lambda x, w: fused_linear_cross_entropy(x, w, t, -100, 0.1, "sum", 300) * 0.25,
            lambda x, w: F.cross_entropy(x @ w.t(), t, label_smoothing=0.1, reduction="sum") * 0.25, [x, w], 2e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_scale_(dtype):
    for n in (1, 7, 1000003):
        for x in (torch.randn(n, device=DEV, dtype=dtype), misaligned((n,), dtype)):
            want = (x.double() * -1.5).to(dtype)
            ops.scale_(x, torch.tensor(-1.5, device=DEV, dtype=torch.bfloat16))
            assert torch.equal(x, want)
    x = torch.randn(64, 33, device=DEV, dtype=dtype).t()  # not contiguous: written back
    want = (x.double() * 3).to(dtype)
    ops.scale_(x, torch.tensor([3.0], device=DEV))
    assert torch.equal(x, want)
    x = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40, 3.0], device=DEV).to(dtype)
    before = x.clone()
    ops.scale_(x, torch.ones((), device=DEV, dtype=dtype))
    assert torch.equal(x.view(torch.uint8), before.view(torch.uint8))


def test_cross_entropy_under_cuda_graph_capture():
    """No host sync inside the ops (the target check asserts on the device), so they capture
    and replay to the eager result; a new target seen by a replay is used."""
    n, h, v = 64, 32, 1000
    x = torch.randn(n, v, device=DEV, dtype=torch.bfloat16)
    xh = torch.randn(n, h, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(v, h, device=DEV, dtype=torch.bfloat16) / 8
    t = torch.randint(0, v, (n,), device=DEV)
    t[3] = -100
    want_ce = ops.fused_cross_entropy(x, t, -100, 0.0, 0)[0]
    want_flce = ops.fused_linear_cross_entropy(xh, w, t, -100, 0.0, 2, 16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ops.fused_cross_entropy(x, t, -100, 0.0, 0)  # warm up on the side stream
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            ce = ops.fused_cross_entropy(x, t, -100, 0.0, 0)[0]
            flce = ops.fused_linear_cross_entropy(xh, w, t, -100, 0.0, 2, 16)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(ce, want_ce)
    for a, b in zip(flce, want_flce):
        assert torch.equal(a, b)
    t[5] = (t[5] + 1) % v  # seen only by the replay
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(ce, ops.fused_cross_entropy(x, t, -100, 0.0, 0)[0])


def rope_ref(x, cos, sin, interleaved):
    rd = 2 * cos.shape[-1]
    c, s = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
    xr, xp = x[..., :rd], x[..., rd:]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2:]
        out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return torch.cat([out, xp], dim=-1)


def rope_tables(seq, half, device):
    inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float64) / half))
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None]
    return ang.cos().float().to(device), ang.sin().float().to(device)


def test_rope_matches_reference():
    for interleaved in (False, True):
        for shape, half in (((2, 1027, 8, 128), 64), ((3, 33, 5, 80), 20), ((1, 7, 3, 10), 3)):
            x = torch.randn(shape, device=DEV, dtype=torch.bfloat16)
            cos, sin = rope_tables(shape[1], half, DEV)
            fwd_bwd(lambda x: rope(x, cos, sin, interleaved), lambda x: rope_ref(x, cos, sin, interleaved),
                    [x], 1e-2)


def test_adamw_many_tensors():
    torch.manual_seed(1)
    sizes = [int(s) for s in torch.randint(1, 300000, (150,))] + [7, 65536, 65537]
    ps = [torch.randn(s, device=DEV) for s in sizes]
    ref = [p.clone().requires_grad_() for p in ps]
    opt = torch.optim.AdamW(ref, lr=1e-3, weight_decay=0.05, foreach=False)
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    steps = [torch.zeros((), device=DEV) for _ in ps]  # read by the one launch on the device
    for _ in range(1, 3):
        gs = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, gs):
            r.grad = g
        opt.step()
        torch._foreach_add_(steps, 1)
        adam_step_(ps, gs, ms, vs, steps, lr=1e-3, weight_decay=0.05, decoupled_weight_decay=True)
    for p, r in zip(ps, ref):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-6)


def test_adamw_step_replays_in_a_cuda_graph():
    # the one launch reads each step count on the device: a captured step replays with the
    # count of each replay (steps advanced inside the graph), as torch's capturable AdamW
    torch.manual_seed(2)
    ps = [torch.randn(s, device=DEV) for s in (1000, 37)]
    ref = [p.clone().requires_grad_() for p in ps]
    opt = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.05, foreach=False)
    gs = [torch.randn_like(p) for p in ps]
    ms, vs = ([torch.zeros_like(p) for p in ps] for _ in range(2))
    steps = [torch.zeros((), device=DEV) for _ in ps]
    mine = ([p.clone() for p in ps], [m.clone() for m in ms], [v.clone() for v in vs], [s.clone() for s in steps])

    def step(p, m, v, s):
        torch._foreach_add_(s, 1)
        adam_step_(p, gs, m, v, s, lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step(*mine)  # warm-up outside the graph, then three replays
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step(*mine)
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(3):
        graph.replay()
    for _ in range(4):
        for r, g in zip(ref, gs):
            r.grad = g
        opt.step()
    torch.cuda.synchronize()
    assert all(float(s) == 4.0 for s in mine[3])
    for p, r in zip(mine[0], ref):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-6)


# ---- layer_norm / rms_norm / softmax / log_softmax: the CUDA kernels of the canonical ops ----
CUDA_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_fwd_bwd(fn, ref_fn, inputs, dtype, grad_tol_dtype=None):
    """Forward and backward of fn against ref_fn run by ATen on CUDA in float32 from the same
    values. In half precision the gradient may also be as far from float32 as ATen's own
    half-precision gradient is (times 2): a backward that reads the saved half-precision
    output cancels in places, for ATen as for us."""
    xs = [t.detach().clone().requires_grad_() for t in inputs]
    rs = [t.detach().float().requires_grad_() for t in inputs]
    hs = [t.detach().clone().requires_grad_() for t in inputs]
    y, r = fn(*xs), ref_fn(*rs)
    assert y.is_cuda
    assert_close(y, r.to(dtype), dtype)
    g = torch.randn_like(r)
    y.backward(g.to(y.dtype))
    r.backward(g)
    if dtype != torch.float32:
        ref_fn(*hs).backward(g.to(dtype))
    for a, b, h in zip(xs, rs, hs):
        if dtype == torch.float32:
            assert_close(a.grad, b.grad, dtype)
        else:
            err, aten_err = rel_err(a.grad, b.grad), rel_err(h.grad, b.grad)
            tol = 1e-2 if (grad_tol_dtype or dtype) == torch.bfloat16 else 2e-3
            assert err < max(tol, 2 * aten_err), (dtype, a.shape, err, aten_err)


NORM_SHAPES = [((3, 7), 1), ((5, 33), 1), ((2, 3, 64), 1), ((4, 3, 5), 2), ((1, 1000), 1)]


@pytest.mark.parametrize("shape,k", NORM_SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(shape, k, affine):
    for dtype in CUDA_DTYPES:
        ns = shape[-k:]
        x = torch.randn(shape, dtype=dtype, device=DEV)
        w = torch.randn(ns, dtype=dtype, device=DEV) if affine else None
        inputs = [x] + ([w] if affine else [])

        def fn(x, w=None):
            return rms_norm(x, ns, w, 1e-5)

        def ref(x, w=None):
            return F.rms_norm(x, ns, w, 1e-5)

        check_fwd_bwd(fn, ref, inputs, dtype, torch.bfloat16 if dtype == torch.float16 else None)


@pytest.mark.parametrize("shape,k", NORM_SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, k, affine):
    for dtype in CUDA_DTYPES:
        ns = shape[-k:]
        x = torch.randn(shape, dtype=dtype, device=DEV) * 2 + 0.5
        w = torch.randn(ns, dtype=dtype, device=DEV) if affine else None
        b = torch.randn(ns, dtype=dtype, device=DEV) if affine else None
        inputs = [x] + ([w, b] if affine else [])

        def fn(x, w=None, b=None):
            return layer_norm(x, ns, w, b, 1e-5)

        def ref(x, w=None, b=None):
            return F.layer_norm(x, ns, w, b, 1e-5)

        check_fwd_bwd(fn, ref, inputs, dtype, torch.bfloat16 if dtype == torch.float16 else None)


@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_norm_stats_match_cpu_kernels(dtype):
    """Same statistics dtypes/shapes as the CPU kernels, and the backwards take and return the same."""
    x = torch.randn(2, 3, 4, 5, dtype=dtype) * 2 + 0.5
    w, b = torch.randn(4, 5, dtype=dtype), torch.randn(4, 5, dtype=dtype)
    g = torch.randn_like(x)
    xc, wc, bc, gc = x.to(DEV), w.to(DEV), b.to(DEV), g.to(DEV)
    tol = torch.bfloat16 if dtype == torch.float16 else dtype
    for weight, bias in ((w, b), (None, None)):
        wd, bd = (wc, bc) if weight is not None else (None, None)
        y, mean, rstd = ops.layer_norm(x, [4, 5], weight, bias, 1e-5)
        yd, meand, rstdd = ops.layer_norm(xc, [4, 5], wd, bd, 1e-5)
        # float32 statistics for every input dtype (the accumulation dtype)
        assert meand.dtype == mean.dtype == rstdd.dtype == rstd.dtype == torch.float32
        assert meand.shape == mean.shape == (2, 3, 1, 1) and rstdd.shape == rstd.shape
        assert_close(yd, y, tol)
        assert_close(meand, mean, torch.float32)
        assert_close(rstdd, rstd, torch.float32)
        # the CUDA backward reads the CPU kernel's statistics
        got = ops.layer_norm_backward(gc, xc, [4, 5], mean.to(DEV), rstd.to(DEV), wd)
        want = ops.layer_norm_backward(g, x, [4, 5], mean, rstd, weight)
        assert len(got) == 3
        for a, e in zip(got, want):  # grad_weight and grad_bias are returned even without weight
            assert a.dtype == e.dtype and a.shape == e.shape
            assert_close(a, e, torch.bfloat16 if dtype != torch.float32 else torch.float32)
        y, rstd = ops.rms_norm(x, [5], None if weight is None else weight[0], None)
        yd, rstdd = ops.rms_norm(xc, [5], None if wd is None else wd[0], None)
        assert rstdd.dtype == rstd.dtype == torch.float32 and rstdd.shape == rstd.shape == (2, 3, 4, 1)
        assert_close(yd, y, tol)
        assert_close(rstdd, rstd, torch.float32 if dtype == torch.float32 else torch.float16)
        got = ops.rms_norm_backward(gc, xc, [5], rstd.to(DEV), None if wd is None else wd[0])
        want = ops.rms_norm_backward(g, x, [5], rstd, None if weight is None else weight[0])
        for a, e in zip(got, want):
            assert a.dtype == e.dtype and a.shape == e.shape
            assert_close(a, e, torch.bfloat16 if dtype != torch.float32 else torch.float32)


def test_norm_empty_rows():
    x = torch.randn(0, 6, device=DEV, requires_grad=True)
    w = torch.randn(6, device=DEV, requires_grad=True)
    y = rms_norm(x, 6, w)
    y.sum().backward()
    assert y.shape == (0, 6) and torch.equal(w.grad, torch.zeros(6, device=DEV))
    _, mean, rstd = ops.layer_norm(x.detach(), [6], None, None, 1e-5)
    assert mean.shape == rstd.shape == (0, 1)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 9, 4), 1), ((4, 1031), -1)])
def test_softmax(log, shape, dim):
    for dtype in CUDA_DTYPES:
        x = torch.randn(shape, dtype=dtype, device=DEV) * 3
        fn = (lambda t: log_softmax(t, dim)) if log else (lambda t: softmax(t, dim))
        ref = (lambda t: F.log_softmax(t, dim)) if log else (lambda t: F.softmax(t, dim))
        check_fwd_bwd(fn, ref, [x], dtype)


def test_softmax_non_contiguous():
    x = torch.randn(6, 10, device=DEV)[:, ::2]
    assert_close(softmax(x.t(), 0), F.softmax(x.t(), 0))
    assert_close(log_softmax(x, 1), F.log_softmax(x, 1))
    assert softmax(x.t(), 0).is_contiguous()


def test_opcheck_norm_softmax():
    oc = torch.library.opcheck
    x = torch.randn(4, 3, 12, device=DEV, requires_grad=True)
    w = torch.randn(12, device=DEV, requires_grad=True)
    b = torch.randn(12, device=DEV, requires_grad=True)
    g = torch.randn(4, 3, 12, device=DEV)
    xd = x.detach()
    oc(ops.rms_norm.default, (x, [12], w, 1e-6))
    oc(ops.rms_norm.default, (x, [3, 12], None, None))
    oc(ops.layer_norm.default, (x, [12], w, b, 1e-5))
    oc(ops.layer_norm.default, (x.bfloat16(), [3, 12], None, None, 1e-5))
    _, rstd = ops.rms_norm(xd, [12], w.detach(), 1e-6)
    oc(ops.rms_norm_backward.default, (g, xd, [12], rstd, w.detach()))
    oc(ops.rms_norm_backward.default, (g, xd, [12], rstd, None))
    _, mean, rstd = ops.layer_norm(xd, [12], w.detach(), b.detach(), 1e-5)
    oc(ops.layer_norm_backward.default, (g, xd, [12], mean, rstd, w.detach()))
    oc(ops.layer_norm_backward.default, (g, xd, [12], mean, rstd, None))
    for name in ("softmax", "log_softmax"):
        oc(getattr(ops, name).default, (x, 1))
        oc(getattr(ops, name).default, (x, -1))
        y = getattr(ops, name)(xd, 1)
        oc(getattr(ops, name + "_backward").default, (g, y, 1))


# ---- 64-bit indexing: more than 2^31 elements ----
BIG_ROWS = (1 << 31) // 4096 + 3  # rows * 4096 > 2^31


def _free_gib():
    free, _ = torch.cuda.mem_get_info()
    return free / 2**30


def test_int64_indexing_rows():
    if _free_gib() < 30:
        pytest.skip("needs 30 GiB of free GPU memory")
    x = torch.empty(BIG_ROWS, 4096, device=DEV, dtype=torch.bfloat16).normal_()
    y = rms_norm(x, 4096)
    tail = slice(BIG_ROWS - 5, BIG_ROWS)
    assert rel_err(y[tail], F.rms_norm(x[tail].float(), (4096,))) < 1e-2
    del y
    s = softmax(x, -1)
    assert rel_err(s[tail], F.softmax(x[tail].float(), -1)) < 1e-2
    del s
    o = swiglu(x, x)
    assert rel_err(o[tail], F.silu(x[tail].float()) * x[tail].float()) < 1e-2
    del o
    t = torch.randint(0, 4096, (BIG_ROWS,), device=DEV)
    loss, lse = torch.ops.mytorch.fused_cross_entropy(x, t, -100, 0.0, 0)
    assert rel_err(loss[tail], F.cross_entropy(x[tail].float(), t[tail], reduction="none")) < 1e-2
    del loss, lse, t
    # the LayerNorm backward (row groups, partial rows, column sums); grad = x
    w = torch.randn(4096, device=DEV, dtype=torch.bfloat16)
    y, mean, rstd = torch.ops.mytorch.layer_norm(x, [4096], w, None, 1e-5)
    del y
    dx, dw, db = torch.ops.mytorch.layer_norm_backward(x, x, [4096], mean, rstd, w)
    xt, wt = x[tail].float().requires_grad_(), w.float().requires_grad_()
    F.layer_norm(xt, (4096,), wt, None, 1e-5).backward(x[tail].float())
    assert rel_err(dx[tail], xt.grad) < 1e-2
    dw_ref = torch.zeros(4096, device=DEV, dtype=torch.float64)
    db_ref = torch.zeros_like(dw_ref)
    for chunk in x.split(1 << 16):
        c = chunk.float()
        dw_ref += (c * F.layer_norm(c, (4096,), eps=1e-5)).sum(0, dtype=torch.float64)
        db_ref += c.sum(0, dtype=torch.float64)
    assert rel_err(dw, dw_ref) < 1e-2 and rel_err(db, db_ref) < 1e-2


def test_int64_indexing_norm_backward_wide_rows():
    # more than 2^31 elements in rows of 65536 (the cluster backward on sm_90+): the last rows'
    # dx and the weight gradient over all rows; grad = x
    d = 65536
    rows = (1 << 31) // d + 3
    if _free_gib() < 30:
        pytest.skip("needs 30 GiB of free GPU memory")
    x = torch.empty(rows, d, device=DEV, dtype=torch.bfloat16).normal_()
    w = torch.randn(d, device=DEV, dtype=torch.bfloat16)
    y, rstd = ops.rms_norm(x, [d], w, 1e-6)
    del y
    dx, dw = ops.rms_norm_backward(x, x, [d], rstd, w)
    tail = slice(rows - 3, rows)
    xt, wt = x[tail].float().requires_grad_(), w.float().requires_grad_()
    F.rms_norm(xt, (d,), wt, 1e-6).backward(x[tail].float())
    assert rel_err(dx[tail], xt.grad) < 1e-2
    dw_ref = torch.zeros(d, device=DEV, dtype=torch.float64)
    for chunk in x.split(1 << 12):
        c = chunk.float()
        dw_ref += (c * F.rms_norm(c, (d,), eps=1e-6)).sum(0, dtype=torch.float64)
    assert rel_err(dw, dw_ref) < 1e-2


def test_int64_indexing_optimizer_step():
    # more than 2^31 elements in one step: blocks of several 8192-element chunks (each thread
    # makes more than one pass); bf16 AdamW, a tensor past 2^31 with an odd tail and a small one
    if _free_gib() < 30:
        pytest.skip("needs 30 GiB of free GPU memory")
    n = (1 << 31) + 8192 * 3 + 13
    ps = [torch.empty(n, device=DEV, dtype=torch.bfloat16).normal_(), torch.randn(1001, device=DEV).bfloat16()]
    gs = [torch.empty_like(p).normal_() for p in ps]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    views = [(0, slice(0, 40000)), (0, slice((1 << 31) - 20000, (1 << 31) + 20000)), (0, slice(n - 30000, n)),
             (1, slice(0, 1001))]
    ref = []
    for i, sl in views:  # the reference step in float32 on copies of these slices
        p = ps[i][sl].float().requires_grad_()
        p.grad = gs[i][sl].float()
        torch.optim.AdamW([p], lr=0.1, weight_decay=0.05, foreach=False).step()
        ref.append(p.detach())
    adam_step_(ps, gs, ms, vs, [torch.ones((), device=DEV) for _ in ps], lr=0.1, weight_decay=0.05,
               decoupled_weight_decay=True)
    for (i, sl), want in zip(views, ref):
        torch.testing.assert_close(ps[i][sl].float(), want, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(ms[i][sl].float(), 0.1 * gs[i][sl].float(), rtol=1e-2, atol=1e-3)


def test_int64_indexing_cross_entropy_one_pass():
    # more than 2^31 logits: 16-byte rows (the block form; 66048 columns: the streamed form on
    # sm_90+) and rows of scalars (4095 columns: the cluster form on sm_90+), the gradient of the
    # last rows and the summed loss
    if _free_gib() < 30:
        pytest.skip("needs 30 GiB of free GPU memory")
    flat = torch.empty(BIG_ROWS * 4096, device=DEV, dtype=torch.bfloat16).normal_()
    for cols in (4096, 66048, 4095):
        rows = flat.numel() // cols
        x = flat[: rows * cols].view(rows, cols)
        assert x.numel() > 2**31
        t = torch.randint(0, cols, (rows,), device=DEV)
        loss, grad = ops.fused_cross_entropy_grad(x, t, -100, 0.0, 2)
        tail = slice(rows - 5, rows)
        xt = x[tail].float().requires_grad_()
        F.cross_entropy(xt, t[tail], reduction="sum").backward()
        assert rel_err(grad[tail], xt.grad) < 1e-2
        want = sum(F.cross_entropy(c.float(), tc, reduction="sum").double()
                   for c, tc in zip(x.split(1 << 16), t.split(1 << 16)))
        assert rel_err(loss, want) < 1e-2
        del grad, x
