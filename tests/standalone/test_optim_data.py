"""Optimizers and schedules against torch.optim; DataLoader batching and shuffling."""
import math

import numpy as np
import pytest
import torch

import mytorch
from mytorch.data import DataLoader, DistributedSampler, TensorDataset


def _pair(seed=0):
    g = np.random.default_rng(seed)
    w = g.standard_normal((5, 4)).astype(np.float32)
    return mytorch.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)


OPTS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, betas=(0.8, 0.99))),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kw", OPTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTS)])
def test_optimizers_match_torch(name, kw):
    mp, tp = _pair()
    mopt = getattr(mytorch.optim, name)([mp], **kw)
    topt = getattr(torch.optim, name)([tp], **kw)
    for step in range(5):
        g = np.random.default_rng(step + 10).standard_normal((5, 4)).astype(np.float32)
        mp.grad, tp.grad = mytorch.tensor(g), torch.tensor(g)
        mopt.step()
        topt.step()
    torch.testing.assert_close(mp.data, tp.detach(), rtol=1e-5, atol=1e-6)


def test_cosine_schedule_and_clipping():
    mp, tp = _pair()
    opt = mytorch.optim.SGD([mp], lr=1.0)
    sched = mytorch.optim.CosineWithWarmup(opt, warmup_steps=3, total_steps=13, min_ratio=0.1)
    lrs = []
    for _ in range(15):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    assert lrs[:3] == pytest.approx([0.25, 0.5, 0.75])
    assert lrs[3] == pytest.approx(1.0) and lrs[13] == pytest.approx(0.1) and lrs[14] == lrs[13]
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:]))
    g = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32) * 10
    mp.grad, tp.grad = mytorch.tensor(g), torch.tensor(g)
    n_m = mytorch.optim.clip_grad_norm_([mp], 1.0)
    n_t = torch.nn.utils.clip_grad_norm_([tp], 1.0)
    assert n_m == pytest.approx(n_t.item(), rel=1e-5)
    torch.testing.assert_close(mp.grad.data, tp.grad)


def test_optimizer_state_dict_roundtrip():
    mp, _ = _pair()
    opt = mytorch.optim.Adam([mp], lr=0.1)
    mp.grad = mytorch.ones(5, 4)
    opt.step()
    sd = opt.state_dict()
    mp2 = mytorch.tensor(mp.data.clone(), requires_grad=True)
    opt2 = mytorch.optim.Adam([mp2], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.state[mp2]["step"] == 1
    for o, p in ((opt, mp), (opt2, mp2)):
        p.grad = mytorch.ones(5, 4)
        o.step()
    torch.testing.assert_close(mp.data, mp2.data)


def test_dataloader_batches_shuffle_drop_last():
    x = mytorch.tensor(np.arange(10 * 3, dtype=np.float32).reshape(10, 3))
    y = mytorch.tensor(np.arange(10))
    ds = TensorDataset(x, y)
    plain = list(DataLoader(ds, batch_size=4))
    assert [b[1].tolist() for b in plain] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert plain[0][0].shape == (4, 3)
    dl = DataLoader(ds, batch_size=4, shuffle=True, drop_last=True, seed=3)
    assert len(dl) == 2
    e1, e2 = [b[1].tolist() for b in dl], [b[1].tolist() for b in dl]
    assert all(len(b) == 4 for b in e1) and e1 != e2  # a new order each epoch
    again = DataLoader(ds, batch_size=4, shuffle=True, drop_last=True, seed=3)
    assert [b[1].tolist() for b in again] == e1  # the same seed, the same batches
    for b in dl:  # rows stay together
        assert (b[0].numpy()[:, 0] == b[1].numpy() * 3).all()


def test_distributed_sampler_splits_evenly():
    ds = TensorDataset(mytorch.tensor(np.arange(11)))
    parts = [list(DistributedSampler(ds, 3, r, seed=1)) for r in range(3)]
    assert all(len(p) == 4 for p in parts)
    assert set(sum(parts, [])) == set(range(11))
    loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 3, 0, seed=1))
    assert sum((b[0].tolist() for b in loader), []) == parts[0]
