"""Real Hugging Face models with mytorch kernels: same logits, loss and gradients."""
import contextlib

import pytest
import torch

import mytorch_ext

pytest.importorskip("transformers")

from hf_models import assert_same, batch, build, probe  # noqa: E402

MODELS = ["llama", "gpt2", "qwen2", "mistral"]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# fp32 on the CPU; bf16 on CUDA (the Triton kernels are 16-bit)
SETUP = {"cpu": (torch.float32, dict(rtol=2e-4, atol=2e-5)),
         "cuda": (torch.bfloat16, dict(rtol=5e-2, atol=5e-2))}


@pytest.fixture(autouse=True)
def _clean():
    # tiny models: one thread (threads only add start-up and contention at these sizes)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    mytorch_ext.unpatch()
    mytorch_ext.patch_stats(reset=True)
    yield
    mytorch_ext.unpatch()
    torch.set_num_threads(threads)


def _expected_kernels(name, device):
    """Ops that must have run mytorch kernels (those with a kernel on this device)."""
    from mytorch_ext.patching.aten import _has_kernel

    ops = []
    if name == "gpt2" and _has_kernel("layer_norm", device):
        ops.append("layer_norm")
    if name != "gpt2" and _has_kernel("rms_norm", device):
        ops.append("rms_norm")
    return ops


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", ["causal", "padding"])
@pytest.mark.parametrize("name", MODELS)
def test_patch(name, mask, device):
    """mytorch_ext.patch(): the model's code is untouched (attn_implementation="sdpa")."""
    dtype, tol = SETUP[device]
    model = build(name, "sdpa", dtype, device)
    data = batch(mask, device)
    ref = probe(model, *data)
    with mytorch_ext.patched():
        got = probe(model, *data)
    stats = mytorch_ext.patch_stats()
    assert_same(got, ref, **tol)
    assert stats["sdpa"]["mytorch"] == 2 and stats["sdpa"]["fallthrough"] == 0, stats
    if name == "gpt2" and "layer_norm" in _expected_kernels(name, device):
        assert stats["layer_norm"] == {"mytorch": 5, "fallthrough": 0}, stats  # 2 per block + ln_f
    from mytorch_ext.patching.aten import _has_kernel

    if _has_kernel("log_softmax", device):
        assert stats["log_softmax"]["mytorch"] >= 1, stats  # the loss's cross_entropy


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", ["causal", "padding"])
@pytest.mark.parametrize("name", MODELS)
def test_apply_to(name, mask, device):
    """apply_to(model): attn_implementation "mytorch" and swapped modules; revert() undoes it."""
    dtype, tol = SETUP[device]
    model = build(name, "sdpa", dtype, device)
    data = batch(mask, device)
    ref = probe(model, *data)
    handle = mytorch_ext.apply_to(model)
    assert model.config._attn_implementation == "mytorch"
    got = probe(model, *data)
    stats = mytorch_ext.patch_stats(reset=True)
    assert_same(got, ref, **tol)
    assert stats["hf_attention"] == {"mytorch": 2, "fallthrough": 0}, stats
    for op in _expected_kernels(name, device):
        assert stats[op] == {"mytorch": 5, "fallthrough": 0}, stats  # 2 per block + the final norm
    if name == "gpt2" and device == "cpu":
        assert stats["gelu"] == {"mytorch": 2, "fallthrough": 0}, stats
    mytorch_ext.revert(model)
    assert model.config._attn_implementation == "sdpa"
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert handle.modules == []
    probe(model, *data)
    assert mytorch_ext.patch_stats() == {}


def test_from_config_attn_implementation():
    """AutoModelForCausalLM.from_config(cfg, attn_implementation="mytorch")."""
    ref_model = build("llama", "sdpa")
    model = build("llama", "mytorch")
    assert model.config._attn_implementation == "mytorch"
    data = batch("padding")
    ref = probe(ref_model, *data)
    got = probe(model, *data)
    assert_same(got, ref, rtol=2e-4, atol=2e-5)
    assert mytorch_ext.patch_stats()["hf_attention"] == {"mytorch": 2, "fallthrough": 0}


def test_apply_to_twice_and_fallthrough():
    model = build("qwen2")
    mytorch_ext.apply_to(model)
    h = mytorch_ext.apply_to(model)
    assert len(h.modules) == 5
    # float16 on the CPU has no flash_attn kernel: the attention falls through to sdpa
    model.half()
    ids, mask, labels = batch("padding")
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    stats = mytorch_ext.patch_stats()
    assert stats["hf_attention"] == {"mytorch": 0, "fallthrough": 2}, stats
    h.revert()
    assert model.config._attn_implementation == "sdpa"


def test_convergence_llama():
    """50 AdamW steps with and without mytorch kernels: the loss curves agree."""
    def train(patch):
        model = build("llama", seed=3)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(4)
        losses = []
        ctx = mytorch_ext.patched() if patch else contextlib.nullcontext()
        h = mytorch_ext.apply_to(model) if patch else None
        with ctx:
            for _ in range(50):
                ids = torch.randint(0, 24, (4, 16), generator=g)  # a small vocabulary: learnable
                loss = model(input_ids=ids, labels=ids).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        if h is not None:
            h.revert()
        return torch.tensor(losses)

    ref = train(False)
    got = train(True)
    assert mytorch_ext.patch_stats()["hf_attention"]["mytorch"] == 100
    assert ref[-1] < ref[0] - 0.5  # it learns
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)


def test_compile_no_graph_break():
    """torch.compile of a patched model: mytorch ops in the graph, no graph break."""
    from torch._dynamo.backends.common import aot_autograd

    model = build("llama", dtype=torch.bfloat16)
    ids, _, labels = batch("causal")
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    seen = []

    def capture(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    with mytorch_ext.patched():
        mytorch_ext.apply_to(model)
        torch._dynamo.reset()
        explain = torch._dynamo.explain(model)(input_ids=ids)
        assert explain.graph_break_count == 0, explain.break_reasons
        compiled = torch.compile(model, backend=aot_autograd(fw_compiler=capture), fullgraph=True)
        out = compiled(input_ids=ids, labels=labels)
        out.loss.backward()
        mytorch_ext.revert(model)
    torch._dynamo.reset()
    assert "mytorch.flash_attn.default" in seen, seen
    assert "mytorch.rms_norm.default" in seen, seen
    torch.testing.assert_close(out.logits.detach(), ref, rtol=2e-2, atol=2e-2)
