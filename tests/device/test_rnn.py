"""nn.LSTM / nn.GRU on the device: the fused cells (_thnn_fused_lstm_cell,
_thnn_fused_gru_cell) and their backwards run natively and match the CPU, gradients too."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

D = "mytorch"

CONFIGS = [
    dict(num_layers=1, bias=True, batch_first=False, bidirectional=False),
    dict(num_layers=2, bias=True, batch_first=True, bidirectional=True),
    dict(num_layers=1, bias=False, batch_first=True, bidirectional=False),
]


def run(module, x, h0, device):
    m = module.to(device)
    xd = x.detach().to(device).requires_grad_()
    hd = tuple(h.detach().to(device).requires_grad_() for h in h0)
    out, hn = m(xd, hd if len(hd) > 1 else hd[0])
    hn = hn if isinstance(hn, tuple) else (hn,)
    loss = (out * torch.linspace(-1, 1, out.shape[-1]).to(device)).sum() + sum(h.sum() for h in hn)
    loss.backward()
    grads = [p.grad.cpu() for p in m.parameters()] + [xd.grad.cpu()] + [h.grad.cpu() for h in hd]
    return out.detach().cpu(), [h.detach().cpu() for h in hn], grads


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_rnn_matches_cpu(kind, cfg):
    torch.manual_seed(0)
    cpu = getattr(torch.nn, kind)(input_size=5, hidden_size=7, **cfg)
    dev = getattr(torch.nn, kind)(input_size=5, hidden_size=7, **cfg)
    dev.load_state_dict(cpu.state_dict())
    B, T = 3, 4
    x = torch.randn(B, T, 5) if cfg["batch_first"] else torch.randn(T, B, 5)
    layers = cfg["num_layers"] * (2 if cfg["bidirectional"] else 1)
    h0 = (torch.randn(layers, B, 7),) + ((torch.randn(layers, B, 7),) if kind == "LSTM" else ())
    ref = run(cpu, x, h0, "cpu")
    with no_fallbacks():
        got = run(dev, x, h0, D)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-5)
    for a, b in zip(got[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert len(got[2]) == len(ref[2])
    for a, b in zip(got[2], ref[2]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_cell_gradcheck_float64(cell, bias):
    """The fused cells' analytic gradients (our backward kernels) against finite differences."""
    torch.manual_seed(1)
    B, H = 2, 3
    g = 4 if cell == "lstm" else 3
    ig = torch.randn(B, g * H, dtype=torch.float64, device=D, requires_grad=True)
    hg = torch.randn(B, g * H, dtype=torch.float64, device=D, requires_grad=True)
    state = torch.randn(B, H, dtype=torch.float64, device=D, requires_grad=True)
    biases = [torch.randn(g * H, dtype=torch.float64, device=D, requires_grad=True)
              for _ in range(2)] if bias else []

    if cell == "lstm":
        def f(ig, hg, cx, *b):
            hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx, *b)
            return hy, cy
    else:
        def f(ig, hg, hx, *b):
            return torch.ops.aten._thnn_fused_gru_cell(ig, hg, hx, *b)[0]
    with no_fallbacks():  # the cells and their backwards are native
        outs = f(ig, hg, state, *biases)
        outs = outs if isinstance(outs, tuple) else (outs,)
        torch.autograd.grad(sum(o.sum() for o in outs), (ig, hg, state, *biases))
    # (gradcheck's own comparisons may use the fallback)
    assert torch.autograd.gradcheck(f, (ig, hg, state, *biases), eps=1e-6, atol=1e-6)


def test_lstm_only_cell_state_gradient():
    """A loss on cy alone: grad_hy undefined in the backward."""
    ig = torch.randn(2, 8, device=D, requires_grad=True)
    hg = torch.randn(2, 8, device=D)
    cx = torch.randn(2, 2, device=D, requires_grad=True)
    _, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx)
    cy.sum().backward()
    ig_c = ig.detach().cpu().requires_grad_()
    cx_c = cx.detach().cpu().requires_grad_()
    gates = (ig_c + hg.cpu()).chunk(4, 1)
    cy_c = torch.sigmoid(gates[1]) * cx_c + torch.sigmoid(gates[0]) * torch.tanh(gates[2])
    cy_c.sum().backward()
    torch.testing.assert_close(ig.grad.cpu(), ig_c.grad)
    torch.testing.assert_close(cx.grad.cpu(), cx_c.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lstm_low_precision(dtype):
    torch.manual_seed(0)
    m = torch.nn.LSTM(4, 6, batch_first=True)
    x = torch.randn(2, 5, 4)
    ref, _ = m(x)
    with no_fallbacks():
        out, _ = m.to(D, dtype)(x.to(D, dtype))
    assert out.dtype == dtype
    torch.testing.assert_close(out.float().cpu(), ref, rtol=3e-2, atol=3e-2)


def test_bad_cell_inputs_raise_clear_errors():
    ig = torch.randn(2, 8, device=D)
    with pytest.raises(RuntimeError, match=r"_thnn_fused_lstm_cell: expected cx of shape \[2, 2\]"):
        torch.ops.aten._thnn_fused_lstm_cell(ig, ig, torch.randn(2, 3, device=D))
    with pytest.raises(RuntimeError, match=r"_thnn_fused_gru_cell: expected input_gates of width 3"):
        torch.ops.aten._thnn_fused_gru_cell(ig, ig, torch.randn(2, 2, device=D))
    with pytest.raises(RuntimeError, match=r"_thnn_fused_lstm_cell: expected input_gates to have dtype"):
        i = torch.ones(2, 8, dtype=torch.long, device=D)
        torch.ops.aten._thnn_fused_lstm_cell(i, i, torch.ones(2, 2, dtype=torch.long, device=D))
