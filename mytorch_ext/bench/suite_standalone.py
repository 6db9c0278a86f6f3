"""standalone: a training step in the standalone mytorch framework vs torch eager, both on
the selected device (CPU, CUDA, or the mytorch device, where torch's ATen ops also run on
mytorch's kernels: the comparison then isolates the framework)."""
from __future__ import annotations

import torch

from .common import Table, device_skip_reason, has_cuda_kernel, sync


def skip_reason(device: str) -> str | None:
    reason = device_skip_reason(device)
    if reason:
        return reason
    if device == "cuda" and not has_cuda_kernel("mm"):
        return "mytorch_ext is built without its CUDA kernels, which standalone mytorch needs on CUDA"
    return None


def run(device: str, mode: str, progress) -> list[Table]:
    import mytorch

    from . import standalone as sb

    steps, warmup = {"smoke": (1, 0), "quick": (5, 2), "full": (30, 5)}[mode]
    pairs = (("MLP 784-512-512-10, b128", sb.mlp_pair), ("CNN 2 conv+BN 32x32, b32", sb.cnn_pair),
             ("GPT 2 layers d128 ctx64, b16", sb.gpt_pair))
    t = Table(f"training step (AdamW) on {device}, standalone mytorch vs torch eager", "ms",
              "median step time", ["mytorch", "torch"], higher_is_better=False)
    bar = progress(len(pairs), f"standalone ({device})")
    for name, make in pairs:
        mytorch.manual_seed(0)
        m, tm, x, y = make()
        tm.load_state_dict({k: v.data.clone() for k, v in m.state_dict().items()})
        m.to(device)
        tm.to(device)
        mx, my = mytorch.tensor(x, device=device), mytorch.tensor(y, device=device)
        tx, ty = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
        mopt = mytorch.optim.AdamW(m.parameters(), lr=1e-3)
        topt = torch.optim.AdamW(tm.parameters(), lr=1e-3, foreach=False)
        lm, lt = sb.mytorch_step(m, mopt, mx, my).item(), sb.torch_step(tm, topt, tx, ty).item()
        if abs(lm - lt) > 1e-4 * max(1.0, abs(lt)):
            raise RuntimeError(f"standalone {name}: first losses differ ({lm} vs {lt})")
        for _ in range(warmup):
            sb.mytorch_step(m, mopt, mx, my)
            sb.torch_step(tm, topt, tx, ty)

        def timed(step, *args):
            return sb.timed(lambda: (step(*args), sync(device)), steps) * 1e3

        t.add(name, {"torch": timed(sb.torch_step, tm, topt, tx, ty),
                     "mytorch": timed(sb.mytorch_step, m, mopt, mx, my)})
        bar.step(name)
    bar.close()
    return [t]
