"""attn_implementation="mytorch" under the torch.compile that generate() applies to the decode
step of a static cache: the attention backend choice (Python state, made at the first eager
call) is never traced, so mytorch's attention adds no graph break that stock SDPA does not
have. Each check runs in a fresh process, where that choice is not yet made."""
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
pytest.importorskip("transformers")

HERE = os.path.dirname(__file__)

_FULLGRAPH_FIRST_CALL = """
import torch, mytorch_ext
from mytorch_ext.patching import aten, hf
class M:
    is_causal = True
q = torch.randn(1, 4, 16, 64, device="cuda", dtype=torch.bfloat16)
assert not aten._attention["ready"]
f = torch.compile(lambda q: hf.mytorch_attention_forward(M(), q, q, q, None)[0], fullgraph=True)
out = f(q)
ref = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2)
assert (out.float() - ref.float()).abs().max().item() < 2e-2
f(q)  # eager ready-making happens outside the graph; the compiled call still runs
print("ok")
"""

_GENERATE = """
import json, sys, torch
from torch._dynamo.utils import counters
sys.path.insert(0, {tests!r})
import hf_models, mytorch_ext
from mytorch_ext.patching import aten
attn, dtype = sys.argv[1], getattr(torch, sys.argv[2])
model = hf_models.build("llama", attn, dtype=dtype, device="cuda")
ids = torch.randint(0, hf_models.VOCAB, (2, 12), generator=torch.Generator().manual_seed(0)).cuda()
mask = torch.ones_like(ids)
mask[0, 3] = 0   # a hole in one prompt
mask[1, :2] = 0  # left padding in the other
out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6,
                     min_new_tokens=6, do_sample=False, cache_implementation="static", pad_token_id=0)
print(json.dumps({{"breaks": sorted(counters["graph_break"]), "ready": aten._attention["ready"],
                  "tokens": out.tolist()}}))
"""


def _run(code, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, ".."), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_first_call_compiles_with_fullgraph():
    assert _run(_FULLGRAPH_FIRST_CALL) == "ok"


def test_static_cache_generate_adds_no_graph_break():
    code = _GENERATE.format(tests=os.path.abspath(os.path.join(HERE, "..", "patching")))
    mine, stock = (json.loads(_run(code, attn, "bfloat16")) for attn in ("mytorch", "sdpa"))
    assert mine["breaks"] == stock["breaks"], (mine["breaks"], stock["breaks"])
    assert mine["ready"]
    assert len(mine["tokens"][0]) == len(stock["tokens"][0]) == 18


def test_static_cache_generate_float32_tokens_equal_stock():
    """The compiled decode step (Inductor, CUDA graphs) takes the kvcache op with the mask as
    key_mask; in float32 its greedy tokens equal stock SDPA's, the mask's hole and left padding
    included."""
    code = _GENERATE.format(tests=os.path.abspath(os.path.join(HERE, "..", "patching")))
    mine, stock = (json.loads(_run(code, attn, "float32")) for attn in ("mytorch", "sdpa"))
    assert mine["tokens"] == stock["tokens"]
