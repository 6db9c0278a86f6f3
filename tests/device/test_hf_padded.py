"""Hugging Face models on the device with padded batches (attention masks with zeros):
greedy generate() and a training step equal to the CPU. Models come from small configs."""
import pytest
import torch

import mytorch_ext  # noqa: F401

transformers = pytest.importorskip("transformers")

D = "mytorch"
VOCAB = 128


def config(name):
    if name == "gpt2":
        return transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                                       n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                       attn_pdrop=0.0, attn_implementation="sdpa")
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
           "mistral": transformers.MistralConfig}[name]
    return cls(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               attn_implementation="sdpa")


def model_pair(name):
    torch.manual_seed(0)
    cpu = transformers.AutoModelForCausalLM.from_config(config(name)).eval()
    dev = transformers.AutoModelForCausalLM.from_config(config(name)).eval()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to(D)


def padded_prompts(side):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, VOCAB, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    if side == "left":
        mask[0, :4] = 0
        mask[2, :1] = 0
    else:
        mask[0, 5:] = 0
        mask[2, 8:] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2", "mistral"])
def test_padded_greedy_generate_equals_cpu(name):
    cpu, dev = model_pair(name)
    ids, mask = padded_prompts("left")
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = cpu.generate(input_ids=ids, attention_mask=mask, **kw)
        got = dev.generate(input_ids=ids.to(D), attention_mask=mask.to(D), **kw)
    assert got.device.type == D
    assert torch.equal(got.cpu(), expected), (got.cpu(), expected)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_padded_forward_logits_equal_cpu(name):
    cpu, dev = model_pair(name)
    ids, mask = padded_prompts("right")
    with torch.no_grad():
        ref = cpu(input_ids=ids, attention_mask=mask).logits
        out = dev(input_ids=ids.to(D), attention_mask=mask.to(D)).logits
    keep = mask.bool()
    torch.testing.assert_close(out.cpu()[keep], ref[keep], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2", "mistral"])
def test_padded_training_step_equals_cpu(name):
    cpu, dev = model_pair(name)
    cpu.train()
    dev.train()
    ids, mask = padded_prompts("right")
    labels = ids.masked_fill(mask == 0, -100)
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-3)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=1e-3)
    losses = []
    for model, opt, dv in ((cpu, opt_c, "cpu"), (dev, opt_d, D)):
        out = model(input_ids=ids.to(dv), attention_mask=mask.to(dv), labels=labels.to(dv))
        out.loss.backward()
        grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
        opt.step()
        opt.zero_grad()
        with torch.no_grad():  # the loss after the step
            after = model(input_ids=ids.to(dv), attention_mask=mask.to(dv), labels=labels.to(dv)).loss
        losses.append((out.loss.detach().cpu(), grads, after.cpu()))
    (l_c, g_c, a_c), (l_d, g_d, a_d) = losses
    torch.testing.assert_close(l_d, l_c, rtol=1e-5, atol=1e-5)
    assert g_c.keys() == g_d.keys()
    for n in g_c:
        torch.testing.assert_close(g_d[n], g_c[n], rtol=1e-4, atol=1e-5, msg=lambda m: f"{n}: {m}")
    torch.testing.assert_close(a_d, a_c, rtol=1e-5, atol=1e-5)
    assert a_c < l_c
