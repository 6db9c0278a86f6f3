"""attn_implementation="mytorch" in generate(): attention through flash_attn_with_kvcache
(mytorch_ext/patching/hf_kvcache.py). Greedy tokens equal stock SDPA's on four model families,
with and without left padding or a hole in the mask, on a static cache and a dynamic one,
eager and with the decode step compiled, and the route is the one taken; prefill masks it
cannot express and training go to the dense path."""
import pytest
import torch

import hf_models
from mytorch_ext.patching import hf_kvcache

pytest.importorskip("transformers")


def _generate(name, attn, ids, mask, cache, dtype=torch.float64, sliding_window=None, graphs=None):
    """Greedy generate(); with `graphs` (a list), the decode step is compiled (fullgraph, as
    transformers does on a GPU with a static cache) by a backend that appends each graph's code
    to the list and runs it as traced."""
    from transformers import AutoModelForCausalLM, CompileConfig

    cfg = hf_models.config(name, attn)
    if sliding_window is not None:
        cfg.sliding_window = sliding_window
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(dtype)
    if graphs is not None:
        def backend(gm, example_inputs):
            graphs.append(gm.code)
            return gm.forward

        cc = CompileConfig(fullgraph=True, backend=backend, mode=None)
        cc._compile_all_devices = True  # transformers compiles on a GPU only by default
        model.generation_config.compile_config = cc
    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False,
                          cache_implementation=cache, pad_token_id=0)


def _inputs(pad):
    ids = torch.randint(0, hf_models.VOCAB, (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 9, dtype=torch.long)
    if pad:
        mask[1, :3] = 0  # left padding, as generate() takes it
    return ids, mask


@pytest.mark.parametrize("cache,pad", [("static", False), ("static", True), ("dynamic", False)],
                         ids=["static-no_padding", "static-left_padding", "dynamic-no_padding"])
@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2", "mistral"])
def test_greedy_generate(name, cache, pad):
    """Every decode step of both layers takes the kvcache route (the prefill too with padding);
    without padding a dynamic cache's decode steps come without a mask (one query over the
    whole cache)."""
    ids, mask = _inputs(pad)
    want = _generate(name, "sdpa", ids, mask, cache)
    hf_kvcache.stats(reset=True)
    got = _generate(name, "mytorch", ids, mask, cache)
    st = hf_kvcache.stats(reset=True)
    assert torch.equal(got, want)
    assert st["kvcache"] >= 2 * 9, st


def test_dynamic_cache_with_padding_and_sliding_window():
    """A dynamic cache with left padding, and a window shorter than the sequence (the static
    sliding-window layer rolls its buffer: the mask still says which keys each query sees)."""
    ids, mask = _inputs(True)
    for cache, window in (("dynamic", None), ("static", 4), ("dynamic", 4)):
        want = _generate("mistral", "sdpa", ids, mask, cache, sliding_window=window)
        hf_kvcache.stats(reset=True)
        got = _generate("mistral", "mytorch", ids, mask, cache, sliding_window=window)
        assert torch.equal(got, want), (cache, window)
        assert hf_kvcache.stats()["kvcache"] > 0


def test_padding_inside_a_sequence():
    """A hole in one sequence's mask (its prompt) and left padding in the other: the prefill
    takes the dense path, every decode step the kvcache route with the mask as key_mask."""
    ids, mask = _inputs(True)
    mask[0, 4] = 0
    for cache in ("static", "dynamic"):
        want = _generate("llama", "sdpa", ids, mask, cache)
        hf_kvcache.stats(reset=True)
        got = _generate("llama", "mytorch", ids, mask, cache)
        st = hf_kvcache.stats(reset=True)
        assert torch.equal(got, want), cache
        assert st["kvcache"] == 2 * 9 and st["dense"] == 2, (cache, st)


@pytest.mark.parametrize("name,window", [("llama", None), ("gpt2", None), ("mistral", 4)],
                         ids=["llama", "gpt2", "mistral-sliding_window"])
def test_compiled_decode_step(name, window):
    """A static cache's decode step compiled with fullgraph=True: every graph holds the kvcache
    op (no host read breaks it), and the tokens equal stock SDPA's, with a hole in one
    sequence's mask and left padding in the other; with a window shorter than the sequence the
    static sliding-window layer rolls its buffer (a second graph)."""
    ids, mask = _inputs(True)
    mask[0, 4] = 0
    want = _generate(name, "sdpa", ids, mask, "static", sliding_window=window)
    graphs = []
    got = _generate(name, "mytorch", ids, mask, "static", sliding_window=window, graphs=graphs)
    assert torch.equal(got, want)
    assert graphs and all("flash_attn_with_kvcache" in g for g in graphs), graphs


def test_generate_on_the_mytorch_device():
    """model.to("mytorch"): the same route on the device's kernels, a hole in one mask and left
    padding in the other; stock SDPA's tokens on the CPU, and no op of the route falls back to
    the CPU (the mask is read with ops the device has)."""
    import mytorch_ext

    if not hasattr(torch, "mytorch"):
        mytorch_ext.register_device()
    ids, mask = _inputs(True)
    mask[0, 4] = 0
    want = _generate("llama", "sdpa", ids, mask, "dynamic")
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_models.config("llama", "mytorch")).to(torch.float64).to("mytorch")
    mytorch_ext.reset_fallback_counts()
    hf_kvcache.stats(reset=True)
    got = model.generate(input_ids=ids.to("mytorch"), attention_mask=mask.to("mytorch"), max_new_tokens=10,
                         do_sample=False, pad_token_id=0)
    assert torch.equal(got.cpu(), want)
    assert hf_kvcache.stats(reset=True)["kvcache"] == 2 * 9
    assert mytorch_ext.fallback_counts() == {}


def test_float32_llama():
    ids, mask = _inputs(True)
    want = _generate("llama", "sdpa", ids, mask, "static", dtype=torch.float32)
    assert torch.equal(_generate("llama", "mytorch", ids, mask, "static", dtype=torch.float32), want)


def test_dense_path_for_other_masks_and_training():
    """Padding inside a sequence (right padding) and a forward that needs gradients keep the
    dense kernel, with SDPA's result."""
    model = hf_models.build("llama", "mytorch", dtype=torch.float64)
    ref = hf_models.build("llama", "sdpa", dtype=torch.float64)
    ids, mask, labels = hf_models.batch("padding")  # row 0 right-padded, row 1 left-padded
    hf_kvcache.stats(reset=True)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask).logits
    assert hf_kvcache.stats(reset=True) == {"kvcache": 0, "dense": 2}
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
    keep = mask.bool()
    torch.testing.assert_close(out[keep], want[keep])
    ids, mask = _inputs(True)
    loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
    loss.backward()
    assert hf_kvcache.stats()["kvcache"] == 0
    assert model.model.layers[0].self_attn.q_proj.weight.grad is not None


def test_generate_under_inference_mode():
    """Under torch.inference_mode the mask is an inference tensor (no version counter): the
    route still takes the decode steps and gives stock SDPA's tokens."""
    ids, mask = _inputs(True)
    with torch.inference_mode():
        want = _generate("llama", "sdpa", ids, mask, "static")
        hf_kvcache.stats(reset=True)
        got = _generate("llama", "mytorch", ids, mask, "static")
    assert torch.equal(got, want)
    assert hf_kvcache.stats(reset=True)["kvcache"] >= 2 * 9
