"""standalone: a training step in the standalone mytorch framework vs torch eager (CPU)."""
from __future__ import annotations

import torch

from .common import Table


def skip_reason(device: str) -> str | None:
    if device != "cpu":
        return "the standalone comparison runs on the CPU (use --device cpu)"
    return None


def run(device: str, quick: bool, progress) -> list[Table]:
    import mytorch

    from . import standalone as sb

    steps, warmup = (5, 2) if quick else (30, 5)
    pairs = (("MLP 784-512-512-10, b128", sb.mlp_pair), ("CNN 2 conv+BN 32x32, b32", sb.cnn_pair),
             ("GPT 2 layers d128 ctx64, b16", sb.gpt_pair))
    t = Table("training step (AdamW), standalone mytorch vs torch eager", "ms", "median step time",
              ["mytorch", "torch"], higher_is_better=False)
    bar = progress(len(pairs), "standalone")
    for name, make in pairs:
        mytorch.manual_seed(0)
        m, tm, x, y = make()
        tm.load_state_dict({k: v.data.clone() for k, v in m.state_dict().items()})
        mx, my = mytorch.tensor(x), mytorch.tensor(y)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        mopt = mytorch.optim.AdamW(m.parameters(), lr=1e-3)
        topt = torch.optim.AdamW(tm.parameters(), lr=1e-3, foreach=False)
        lm, lt = sb.mytorch_step(m, mopt, mx, my).item(), sb.torch_step(tm, topt, tx, ty).item()
        if abs(lm - lt) > 1e-4 * max(1.0, abs(lt)):
            raise RuntimeError(f"standalone {name}: first losses differ ({lm} vs {lt})")
        for _ in range(warmup):
            sb.mytorch_step(m, mopt, mx, my)
            sb.torch_step(tm, topt, tx, ty)
        t.add(name, {"torch": sb.timed(lambda: sb.torch_step(tm, topt, tx, ty), steps) * 1e3,
                     "mytorch": sb.timed(lambda: sb.mytorch_step(m, mopt, mx, my), steps) * 1e3})
        bar.step(name)
    bar.close()
    return [t]
