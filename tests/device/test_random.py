"""Random numbers: a generator per device, seeding and state, native sampling ops."""
import pytest
import torch

import mytorch_ext
from helpers import no_fallbacks

D = "mytorch"


def test_same_seed_same_numbers():
    def draw():
        return [torch.randn(5, device=D).cpu(), torch.rand(5, device=D).cpu(),
                torch.randint(0, 100, (5,), device=D).cpu(), torch.randperm(7, device=D).cpu(),
                torch.empty(5, device=D).normal_(2, 3).cpu(),
                torch.empty(5, device=D).uniform_(-1, 1).cpu(),
                torch.empty(5, device=D).bernoulli_(0.3).cpu()]

    torch.mytorch.manual_seed(123)
    a = draw()
    torch.mytorch.manual_seed(123)
    b = draw()
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    torch.mytorch.manual_seed(124)
    assert not torch.equal(draw()[0], a[0])


def test_sampling_ops_are_native():
    with no_fallbacks():
        torch.randn(4, 5, device=D)
        torch.rand(3, device=D)
        torch.randn_like(torch.empty(3, device=D))
        torch.empty(6, device=D).normal_()
        torch.empty(6, device=D).uniform_(2, 3)
        torch.empty(6, device=D).bernoulli_(0.5)
        torch.empty(6, device=D).bernoulli_(torch.full((6,), 0.5, device=D))
        torch.bernoulli(torch.full((6,), 0.5, device=D))
        torch.randint(3, 9, (8,), device=D)
        torch.randint(9, (8,), device=D)
        torch.empty(8, dtype=torch.int32, device=D).random_()
        torch.randperm(10, device=D)


def test_per_device_generators_are_independent():
    torch.mytorch.manual_seed_all(7)
    a0 = torch.randn(4, device="mytorch:0").cpu()
    a1 = torch.randn(4, device="mytorch:1").cpu()
    assert torch.equal(a0, a1)  # same seed, own stream each
    torch.mytorch.set_device(1)
    torch.mytorch.manual_seed(8)  # only mytorch:1
    b1 = torch.randn(4, device="mytorch:1").cpu()
    b0 = torch.randn(4, device="mytorch:0").cpu()
    assert not torch.equal(b1, a1)
    assert not torch.equal(b0, a0)  # mytorch:0 simply went on


def test_torch_manual_seed_seeds_the_device():
    torch.manual_seed(5)
    a = torch.randn(6, device=D).cpu()
    torch.manual_seed(5)
    assert torch.equal(a, torch.randn(6, device=D).cpu())
    assert torch.mytorch.initial_seed() == 5


def test_seed_is_nondeterministic():
    torch.mytorch.seed()
    s1 = torch.mytorch.initial_seed()
    torch.mytorch.seed()
    assert torch.mytorch.initial_seed() != s1


def test_get_and_set_rng_state():
    state = torch.mytorch.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.rand(10, device=D).cpu()
    torch.mytorch.set_rng_state(state)
    assert torch.equal(a, torch.rand(10, device=D).cpu())
    states = torch.mytorch.get_rng_state_all()
    assert len(states) == 2
    x = [torch.rand(3, device=f"mytorch:{i}").cpu() for i in range(2)]
    torch.mytorch.set_rng_state_all(states)
    y = [torch.rand(3, device=f"mytorch:{i}").cpu() for i in range(2)]
    assert all(torch.equal(p, q) for p, q in zip(x, y))


def test_explicit_generator():
    g = torch.Generator(device=D).manual_seed(3)
    a = torch.randn(5, device=D, generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(a, torch.randn(5, device=D, generator=g).cpu())
    with pytest.raises(RuntimeError, match="Expected a 'mytorch' device type for generator"):
        torch.randn(5, device=D, generator=torch.Generator())


def test_fork_rng():
    with torch.random.fork_rng(devices=[0], device_type="mytorch"):
        torch.randn(3, device=D)
    s = torch.mytorch.get_rng_state()
    with torch.random.fork_rng(devices=[0], device_type="mytorch"):
        torch.randn(3, device=D)
    assert torch.equal(s, torch.mytorch.get_rng_state())


def test_distributions_look_right():
    torch.mytorch.manual_seed(0)
    n = 200_000
    x = torch.randn(n, device=D).cpu().double()
    assert abs(x.mean()) < 0.01 and abs(x.std() - 1) < 0.01
    u = torch.empty(n, device=D).uniform_(-2, 3).cpu().double()
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.02
    b = torch.empty(n, device=D).bernoulli_(0.25).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.01
    r = torch.randint(-3, 4, (n,), device=D).cpu()
    assert r.min() == -3 and r.max() == 3
    assert r.dtype == torch.int64
    p = torch.randperm(1000, device=D).cpu()
    assert torch.equal(p.sort().values, torch.arange(1000))
    h = torch.randn(1000, dtype=torch.bfloat16, device=D).cpu().float()
    assert abs(h.mean()) < 0.15 and h.dtype == torch.float32


def test_strided_and_reduced_precision_targets():
    torch.mytorch.manual_seed(1)
    base = torch.zeros(6, 8, device=D)
    view = base[:, ::2]
    view.normal_()
    b = base.cpu()
    assert (b[:, 1::2] == 0).all() and (b[:, ::2] != 0).all()
    for dt in (torch.float16, torch.bfloat16, torch.float64):
        assert torch.rand(10, dtype=dt, device=D).dtype == dt
    for dt in (torch.int8, torch.uint8, torch.int32, torch.bool):
        t = torch.empty(1000, dtype=dt, device=D).random_()
        assert t.dtype == dt
    x = torch.empty(1000, dtype=torch.int16, device=D).random_(-5, 5).cpu()
    assert x.min() >= -5 and x.max() <= 4


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torch.empty(3, device=D).normal_(0, -1)
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range"):
        torch.empty(3, device=D).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        torch.empty(3, device=D).random_(5, 5)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        torch.empty(3, device=D).bernoulli_(1.5)


@pytest.mark.parametrize("name,draw", [
    ("aten::exponential_", lambda: torch.empty(1000, device=D).exponential_()),
    ("aten::multinomial", lambda: torch.multinomial(torch.ones(100, device=D), 50)),
])
def test_fallback_random_ops_use_the_device_generator(name, draw):
    """Random ops with no native kernel run through the CPU fallback, yet sample from the
    mytorch generator, not the CPU one."""
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"), \
        f"{name} has a native kernel now: pick a random op that still falls back"
    mytorch_ext.set_fallback_mode("silent")
    mytorch_ext.reset_fallback_counts()
    torch.default_generator.manual_seed(1)
    torch.mytorch.manual_seed(9)
    a = draw().cpu()
    torch.default_generator.manual_seed(2)  # the CPU generator must not matter...
    torch.mytorch.manual_seed(9)
    b = draw().cpu()
    assert mytorch_ext.fallback_counts() == {name: 2}
    assert torch.equal(a, b)
    assert not torch.equal(a, draw().cpu())  # ...the device generator advanced...
    torch.default_generator.manual_seed(1)
    torch.mytorch.manual_seed(10)
    assert not torch.equal(a, draw().cpu())  # ...and its seed is the one that counts
