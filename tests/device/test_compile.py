"""torch.compile on the device: the "mytorch" dynamo backend (Inductor's C++ code generation
over device memory) and the dynamo device interface. Compiled training equals eager."""
import copy

import pytest
import torch
from torch import nn

import mytorch_ext  # noqa: F401
from benchmarks.suites.device import GPT, cnn, mlp  # the models `bench device` times

D = "mytorch"
pytestmark = pytest.mark.usefixtures("free_compiled_state")


def train(model, opt, batches, loss_fn):
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_backend_and_interface_are_registered():
    import torch._dynamo
    from torch._dynamo.device_interface import get_interface_for_device

    assert "mytorch" in torch._dynamo.list_backends()
    iface = get_interface_for_device("mytorch")
    assert iface.device_count() == torch.mytorch.device_count() and iface.is_available()


def test_import_does_not_load_dynamo(run_ok):
    out = run_ok("import sys, torch, mytorch_ext\n"
                 "print('torch._dynamo' in sys.modules)\n"
                 "import torch._dynamo\n"
                 "print('mytorch' in torch._dynamo.list_backends())\n")
    assert out.split() == ["False", "True"]


def test_mlp_training_equals_eager():
    torch.manual_seed(0)
    eager = mlp(16, 32, 4).to(D)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="mytorch")
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 16, generator=g).to(D), torch.randint(0, 4, (8,), generator=g).to(D))
               for _ in range(3)]
    ref = train(eager, torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9), batches,
                nn.functional.cross_entropy)
    got = train(compiled, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), batches,
                nn.functional.cross_entropy)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert ref[-1] < ref[0]
    for p, q in zip(model.parameters(), eager.parameters()):
        assert p.device.type == D and p.grad.device.type == D
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), rtol=1e-5, atol=1e-5)


def test_cnn_with_batchnorm_updates_device_buffers():
    torch.manual_seed(0)
    eager = cnn(8, 8, 10, 1).to(D)  # Conv2d 3->8, BatchNorm2d, ReLU, MaxPool2d, Linear
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="mytorch")
    x = torch.randn(4, 3, 8, 8).to(D)
    y = torch.randint(0, 10, (4,)).to(D)
    ref = train(eager, torch.optim.SGD(eager.parameters(), lr=0.05), [(x, y)] * 2,
                nn.functional.cross_entropy)
    got = train(compiled, torch.optim.SGD(model.parameters(), lr=0.05), [(x, y)] * 2,
                nn.functional.cross_entropy)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    bn, bn_ref = model[1], eager[1]
    assert bn.running_mean.device.type == D and int(bn.num_batches_tracked.cpu()) == 2
    torch.testing.assert_close(bn.running_mean.cpu(), bn_ref.running_mean.cpu(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn.running_var.cpu(), bn_ref.running_var.cpu(), rtol=1e-5, atol=1e-6)


def test_gpt_training_equals_eager():
    torch.manual_seed(0)
    eager = GPT().to(D)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="mytorch")
    idx = torch.randint(0, 64, (4, 17)).to(D)
    batches = [(idx[:, :-1], idx[:, 1:])] * 3

    def loss_fn(logits, target):
        return nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())

    ref = train(eager, torch.optim.AdamW(eager.parameters(), lr=1e-3), batches, loss_fn)
    got = train(compiled, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, loss_fn)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert ref[-1] < ref[0]


def test_graph_on_two_devices_is_refused():
    def f(a, b):
        return a.sum() + b.sum().to(a.device)

    a = torch.randn(3, device="mytorch:0")
    b = torch.randn(3, device="mytorch:1")
    with pytest.raises(Exception, match="a graph on several mytorch devices"):
        torch.compile(f, backend="mytorch")(a, b)


def test_default_inductor_backend_on_the_device():
    """torch.compile(model) with no backend named: Inductor, routed for device graphs."""
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(D)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model)
    x = torch.randn(5, 8).to(D)
    out = compiled(x)
    assert out.device.type == D
    torch.testing.assert_close(out.cpu(), eager(x).cpu(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    eager(x).sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-6)
    # CPU graphs go to Inductor unchanged
    cpu_model = nn.Linear(3, 3)
    torch.testing.assert_close(torch.compile(cpu_model)(torch.ones(2, 3)), cpu_model(torch.ones(2, 3)))


def test_outputs_are_device_tensors_over_the_results_and_views_alias_inputs():
    def f(x):
        return x * 2, x[1:]

    x = torch.arange(6.0).to(D)
    doubled, tail = torch.compile(f, backend="mytorch")(x)
    assert doubled.device.type == D and tail.device.type == D
    torch.testing.assert_close(doubled.cpu(), torch.arange(6.0) * 2)
    doubled.add_(1)          # device ops on a compiled result
    doubled.resize_(12)      # grows into device memory
    assert doubled.shape == (12,) and float(doubled[:6].sum().cpu()) == 36.0
    tail.fill_(-1)           # a view of the input, as in eager
    assert x.cpu().tolist() == [0.0, -1.0, -1.0, -1.0, -1.0, -1.0]


def test_compiled_optimizer_step_equals_eager():
    """torch.compile(opt.step): dynamo holds the parameters and the optimizer state as graph
    attributes; the compiled step updates them in device memory."""
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(D)
    model = copy.deepcopy(eager)
    opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    opt_c = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step_c = torch.compile(opt_c.step)
    x = torch.randn(5, 8).to(D)
    for _ in range(3):
        for m, opt, step in ((eager, opt_e, opt_e.step), (model, opt_c, step_c)):
            opt.zero_grad()
            m(x).square().sum().backward()
            step()
    for p, q in zip(model.parameters(), eager.parameters()):
        assert p.device.type == D and opt_c.state[p]["exp_avg"].device.type == D
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt_c.state[p]["exp_avg_sq"].cpu(),
                                   opt_e.state[q]["exp_avg_sq"].cpu(), rtol=1e-5, atol=1e-8)


def test_compiled_loss_and_step_train_the_gpt_as_eager():
    """The compiled training step of the benchmark: model and loss in one graph, the
    optimizer step compiled too."""
    torch.manual_seed(0)
    eager = GPT().to(D)
    model = copy.deepcopy(eager)
    idx = torch.randint(0, 64, (4, 17)).to(D)
    x, y = idx[:, :-1], idx[:, 1:]

    def loss_of(m):
        return lambda a, b: nn.functional.cross_entropy(m(a).flatten(0, 1), b.flatten())

    opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    opt_c = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_e, loss_c = loss_of(eager), torch.compile(loss_of(model))
    step_c = torch.compile(opt_c.step)
    ref, got = [], []
    for _ in range(3):
        for loss_fn, opt, step, out in ((loss_e, opt_e, opt_e.step, ref),
                                        (loss_c, opt_c, step_c, got)):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(x, y)
            loss.backward()
            step()
            out.append(loss.item())
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert ref[-1] < ref[0]


def test_outputs_keep_the_device_the_graph_gave_them():
    def f(a):
        return (a * 2).cpu(), a + 1

    host, dev = torch.compile(f, backend="mytorch")(torch.ones(3).to(D))
    assert host.device.type == "cpu" and dev.device.type == D
    assert host.tolist() == [2.0] * 3 and dev.cpu().tolist() == [2.0] * 3


def test_backward_is_one_device_node():
    """The compiled region is one autograd node between device tensors: its backward and
    the parameters' gradient accumulation run on the device's autograd thread, with no
    per-tensor host/device crossing nodes."""
    import threading

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(D)
    out = torch.compile(model, backend="mytorch")(torch.randn(3, 4).to(D))
    node = out.grad_fn
    assert "CompiledFunction" in type(node).__name__, type(node).__name__
    assert {type(n).__name__ for n, _ in node.next_functions if n is not None} == {"AccumulateGrad"}
    threads = set()
    for p in model.parameters():
        p.register_hook(lambda g: threads.add(threading.get_ident()) or g)
    out.sum().backward()
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert all(p.grad.device.type == D for p in model.parameters())


def test_gelu_feeding_layer_norm_computes_erf_once():
    """The MLP's GELU, read by LayerNorm's mean, variance and normalizing passes: the
    compiled code stores it and computes its erf once per element (Inductor would recompute
    it in each pass), in inference and in training (the forward, and GELU's gradient in the
    backward); results equal eager."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    eager = mlp(16, 32, 4).to(D)
    model = copy.deepcopy(eager)
    x = torch.randn(8, 16).to(D)

    def erf_count(code):
        return code.count(".erf()") + code.count("std::erf(")

    with inductor_config.patch(fx_graph_cache=False):
        with torch.no_grad():
            out, codes = run_and_get_code(torch.compile(model.eval()), x)
        torch.testing.assert_close(out.cpu(), eager.eval()(x).cpu(), rtol=1e-5, atol=1e-6)
        assert [erf_count(c) for c in codes] == [1]

        model.train()
        eager.train()
        _, codes = run_and_get_code(lambda: torch.compile(model)(x).square().sum().backward())
        eager(x).square().sum().backward()
        assert [erf_count(c) for c in codes] == [1, 1]  # forward, backward
        for p, q in zip(model.parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-6)


def test_bias_of_a_linear_read_by_pointwise_ops_is_added_in_their_kernel():
    """A Linear whose output only pointwise ops read (the MLP's first Linear, then GELU)
    compiles to a plain matmul with the bias added inside the fused GELU kernel; a Linear
    whose output leaves the graph (the last one) stays one addmm. Results equal eager."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    model = mlp(16, 32, 4).to(D).eval()
    x = torch.randn(8, 16).to(D)
    with inductor_config.patch(fx_graph_cache=False), torch.no_grad():
        out, (code,) = run_and_get_code(torch.compile(model), x)
        torch.testing.assert_close(out.cpu(), model(x).cpu(), rtol=1e-5, atol=1e-6)
    assert code.count("extern_kernels.mm(") == 1 and code.count("extern_kernels.addmm(") == 1


def test_compiled_training_after_a_patched_compile():
    """patch() and unpatch() change ATen ops' kernels in C++: the dispatch decisions Python's op
    objects cached while patched must not outlive the patch (a compiled graph traced later took
    them, and its losses left eager's)."""
    mlp_cpu = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Softmax(-1))
    with mytorch_ext.patched():
        torch.compile(mlp_cpu, backend="aot_eager", fullgraph=True)(torch.randn(4, 8)).sum().backward()
    torch._dynamo.reset()
    test_mlp_training_equals_eager()
