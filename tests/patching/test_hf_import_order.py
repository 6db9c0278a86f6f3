"""attn_implementation="mytorch" works whatever the import order of mytorch_ext and
transformers, without a register_hf() call (each order in a fresh interpreter)."""
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
ROOT = pathlib.Path(__file__).resolve().parents[2]

BUILD_AND_RUN = """
import torch
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
model = LlamaForCausalLM._from_config(cfg, attn_implementation="mytorch").eval()
before = mytorch_ext.patch_stats().get("hf_attention", {}).get("mytorch", 0)
with torch.no_grad():
    model(input_ids=torch.randint(0, 64, (1, 8)))
after = mytorch_ext.patch_stats().get("hf_attention", {}).get("mytorch", 0)
assert after > before, (before, after)
print("OK", model.config._attn_implementation)
"""

ORDERS = {
    "mytorch_ext_first": "import mytorch_ext\nfrom transformers import LlamaConfig, LlamaForCausalLM\n",
    "transformers_models_first": "from transformers import LlamaConfig, LlamaForCausalLM\nimport mytorch_ext\n",
    "transformers_package_first": ("import transformers\nimport mytorch_ext\n"
                                   "from transformers import LlamaConfig, LlamaForCausalLM\n"),
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_any_import_order(order):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", ORDERS[order] + BUILD_AND_RUN], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK mytorch" in r.stdout
