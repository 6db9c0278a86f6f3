"""No CPU fallback on the two paths users run most: a Hugging Face generate() (greedy,
padded or not) and a DistributedDataParallel training step; and no DDP timer warning."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

transformers = pytest.importorskip("transformers")

D = "mytorch"


def model(name):
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4,
                                      n_positions=64, attn_implementation="sdpa")
    else:
        cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
               "mistral": transformers.MistralConfig}[name]
        cfg = cls(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  attn_implementation="sdpa")
    return transformers.AutoModelForCausalLM.from_config(cfg).eval().to(D)


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2", "mistral"])
@pytest.mark.parametrize("padded", [False, True])
def test_generate_runs_without_fallback(name, padded):
    m = model(name)
    ids = torch.randint(1, 128, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    if padded:
        mask[0, :3] = 0
    with torch.no_grad(), no_fallbacks():
        out = m.generate(input_ids=ids.to(D), attention_mask=mask.to(D), max_new_tokens=4,
                         do_sample=False, pad_token_id=0, eos_token_id=5)
    assert out.device.type == D and out.shape[0] == 2


DDP_STEP = r"""
import os, sys, tempfile, warnings, torch, mytorch_ext
import torch.distributed as dist
dist.init_process_group(init_method="file://" + os.path.join(tempfile.mkdtemp(), "store"),
                        rank=0, world_size=1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(7, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                            torch.nn.Linear(16, 3)).to("mytorch")
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(12, 7).to("mytorch")
y = torch.randint(0, 3, (12,)).to("mytorch")
mytorch_ext.reset_fallback_counts()
for _ in range(3):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x), y).backward()
    opt.step()
print("fallbacks", mytorch_ext.fallback_counts())
dist.destroy_process_group()
"""


def test_ddp_step_runs_without_fallback_or_timer_warning(run):
    r = run(DDP_STEP)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "fallbacks {}"
    assert "Time stats" not in r.stderr, r.stderr[-2000:]
