"""The Gluon Hopper attention kernels compile for sm90 with the installed Triton, on any
machine: tests/triton/hopper_compile.py runs the real launchers against a stand-in sm90 driver
in a process of its own, compiling down to a cubin and launching nothing. The GPU tests
(tests/cuda/test_flash_attn_hopper.py, test_attention_fp8_cuda.py) check what the kernels
compute; this checks, where no GPU is at hand, that the installed Triton (3.6-3.8 are
supported) accepts every kernel and configuration the launchers build."""
import json
import os
import subprocess
import sys

import pytest
import torch

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hopper_compile.py")
# kernel: compiles expected (forward: 4 masks x 2 head dims, and no mask and causal past
# SHORT_SEQLEN at both; backward dK/dV at both head dims, dQ at 128; float8 forward and its V
# transpose at both head dims, short and past SHORT_SEQLEN)
EXPECTED = {"_fwd_kernel": 12, "_bwd_kv_kernel": 4, "_bwd_q_kernel": 1, "_fwd_fp8_kernel": 4,
            "_transpose_kernel": 4}


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="with a GPU, tests/cuda compile and run these kernels on it")
def test_hopper_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["skip"]:
        pytest.skip(result["skip"])
    assert result["compiled"] == EXPECTED
