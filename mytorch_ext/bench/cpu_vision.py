"""mytorch vs ATen (oneDNN) on the CPU: conv2d on ResNet-18 layer shapes, forward and
backward, max_pool2d at CNN shapes, and a full ResNet-18 training step on the `mytorch` device
vs the same model on CPU.

    python -m mytorch_ext.bench.cpu_vision [--quick] [--batch 8] [--image 224]

FLOP convention: conv forward = 2 * N * O * OH * OW * (C / groups) * kH * kW;
backward (input + weight grads) = 2 x forward. Each op is checked against ATen before it is timed.
"""
from __future__ import annotations

import argparse
import copy

import torch
import torch.nn.functional as F

import mytorch_ext
from mytorch_ext.bench.common import Table, environment, time_ms

# ResNet-18 convolutions at a 224x224 input: (C, H, O, kernel, stride, padding)
RESNET18_CONVS = [
    ("conv1 7x7/2", 3, 224, 64, 7, 2, 3),
    ("layer1 3x3", 64, 56, 64, 3, 1, 1),
    ("layer2 3x3/2", 64, 56, 128, 3, 2, 1),
    ("layer2 1x1/2", 64, 56, 128, 1, 2, 0),
    ("layer2 3x3", 128, 28, 128, 3, 1, 1),
    ("layer3 3x3/2", 128, 28, 256, 3, 2, 1),
    ("layer3 3x3", 256, 14, 256, 3, 1, 1),
    ("layer4 3x3/2", 256, 14, 512, 3, 2, 1),
    ("layer4 3x3", 512, 7, 512, 3, 1, 1),
]


def _check(name, ours, ref):
    ours, ref = [t.detach().cpu().double() for t in ours], [t.detach().cpu().double() for t in ref]
    for a, b in zip(ours, ref):
        err = (a - b).norm() / b.norm().clamp_min(1e-30)
        if not err < 1e-4:
            raise RuntimeError(f"{name}: mytorch differs from ATen (relative error {err:.2e})")


def conv_tables(batch: int, quick: bool = False, device: str = "cpu", mode: str | None = None,
                verbose: bool = False) -> tuple[Table, Table]:
    """Forward and backward tables; mytorch's kernels take `device` tensors, ATen CPU ones.
    mode: smoke (one tiny layer), quick (three layers) or full; default from `quick`."""
    mode = mode or ("quick" if quick else "full")
    where = "" if device == "cpu" else f", mytorch on the {device} device"
    fwd = Table(f"conv2d forward, ResNet-18 layers, N={batch}{where}", "GFLOP/s",
                "2*N*O*OH*OW*C*kH*kW / t", ["mytorch", "aten"])
    bwd = Table(f"conv2d backward (grad input + weight), N={batch}{where}", "GFLOP/s",
                "2 x forward FLOP / t", ["mytorch", "aten"])
    convs = {"smoke": [("tiny 3x3", 8, 16, 8, 3, 1, 1)], "quick": RESNET18_CONVS[1:4],
             "full": RESNET18_CONVS}[mode]
    timing = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=3, min_time_s=0.05),
              "full": dict(reps=5, min_time_s=0.5)}[mode]
    for name, c, h, o, k, s, p in convs:
        x = torch.randn(batch, c, h, h)
        w = torch.randn(o, c, k, k) * (1.0 / (c * k * k)) ** 0.5
        y = F.conv2d(x, w, None, s, p)
        gy = torch.randn_like(y)
        xd, wd, gyd = x.to(device), w.to(device), gy.to(device)
        flop = 2.0 * y.numel() * c * k * k
        st, pd = [s, s], [p, p]

        def ours_f(x, w):
            return torch.ops.mytorch.conv2d(x, w, None, st, pd, [1, 1], 1)

        def aten_f(x, w):
            return F.conv2d(x, w, None, s, p)

        def ours_b(gy, x, w):
            return torch.ops.mytorch.conv2d_backward(gy, x, w, st, pd, [1, 1], 1, [True, True, False])

        def aten_b(gy, x, w):
            return torch.ops.aten.convolution_backward(gy, x, w, None, st, pd, [1, 1], False, [0, 0], 1,
                                                       [True, True, False])[:2]

        _check(name + " forward", [ours_f(xd, wd)], [aten_f(x, w)])
        _check(name + " backward", ours_b(gyd, xd, wd)[:2], aten_b(gy, x, w))
        label = f"{name} {c}x{h}x{h}->{o}"
        fwd.add(label, {"mytorch": flop / time_ms(ours_f, device, inputs=(xd, wd), **timing) / 1e6,
                        "aten": flop / time_ms(aten_f, inputs=(x, w), **timing) / 1e6})
        bwd.add(label, {"mytorch": 2 * flop / time_ms(ours_b, device, inputs=(gyd, xd, wd), **timing) / 1e6,
                        "aten": 2 * flop / time_ms(aten_b, inputs=(gy, x, w), **timing) / 1e6})
        if verbose:
            print(f"  {label} done", flush=True)
    return fwd, bwd


# Max pooling at CNN shapes: (label, C, H, kernel, stride, padding)
POOLS = [
    ("2x2/2", 64, 112, 2, 2, 0),
    ("ResNet stem 3x3/2", 64, 112, 3, 2, 1),
    ("2x2/2", 128, 56, 2, 2, 0),
]


def pool_table(batch: int, mode: str = "full", device: str = "cpu") -> Table:
    """max_pool2d forward (values and indices); GB/s counts x read once, y and the int64
    indices written once."""
    where = "" if device == "cpu" else f", mytorch on the {device} device"
    t = Table(f"max_pool2d forward, N={batch}{where}", "GB/s",
              "bytes of x, y and the indices / t", ["mytorch", "aten"])
    pools = {"smoke": [("tiny 2x2/2", 8, 16, 2, 2, 0)], "quick": POOLS[:2], "full": POOLS}[mode]
    timing = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=3, min_time_s=0.05),
              "full": dict(reps=5, min_time_s=0.5)}[mode]
    for name, c, h, k, s, p in pools:
        x = torch.randn(batch, c, h, h)
        xd = x.to(device)

        def ours(x):
            return torch.ops.mytorch.max_pool2d(x, [k, k], [s, s], [p, p], [1, 1], False)

        def aten(x):
            return F.max_pool2d_with_indices(x, k, s, p)

        y, idx = ours(xd)
        ry, ridx = aten(x)
        if not (torch.equal(y.cpu(), ry) and torch.equal(idx.cpu(), ridx)):
            raise RuntimeError(f"max_pool2d {name}: mytorch differs from ATen")
        nbytes = x.numel() * 4 + ry.numel() * (4 + 8)
        t.add(f"{name} {c}x{h}x{h}", {"mytorch": nbytes / time_ms(ours, device, inputs=(xd,), **timing) / 1e6,
                                     "aten": nbytes / time_ms(aten, inputs=(x,), **timing) / 1e6})
    return t


def resnet_step(batch: int, image: int, quick: bool) -> Table:
    import torchvision

    torch.manual_seed(0)
    cpu_model = torchvision.models.resnet18(num_classes=10)
    dev_model = copy.deepcopy(cpu_model).to("mytorch")
    x = torch.randn(batch, 3, image, image)
    target = torch.randint(0, 10, (batch,))
    xd, td = x.to("mytorch"), target.to("mytorch")
    opt_c = torch.optim.SGD(cpu_model.parameters(), lr=1e-3, momentum=0.9)
    opt_d = torch.optim.SGD(dev_model.parameters(), lr=1e-3, momentum=0.9)

    def step(model, opt, x, t):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss

    # correctness: the first loss on both must agree
    lc, ld = step(cpu_model, opt_c, x, target), step(dev_model, opt_d, xd, td)
    _check("resnet18 loss", [ld], [lc])
    before = dict(mytorch_ext.fallback_counts())
    reps = dict(warmup=1, reps=2 if quick else 5, min_time_s=0.0)
    t_dev = time_ms(lambda: step(dev_model, opt_d, xd, td), device="mytorch", **reps)
    t_cpu = time_ms(lambda: step(cpu_model, opt_c, x, target), **reps)
    after = mytorch_ext.fallback_counts()
    fell = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    table = Table(f"ResNet-18 training step (SGD), {batch}x3x{image}x{image}", "steps/s",
                  "1 / median step time", ["mytorch", "aten"])
    table.add("mytorch device vs CPU" + (" (CPU fallbacks: %s)" % fell if fell else ""),
              {"mytorch": 1e3 / t_dev, "aten": 1e3 / t_cpu})
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="three conv shapes, small training step")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image", type=int, default=None, help="training-step image size (default 224, quick 64)")
    args = p.parse_args()
    image = args.image or (64 if args.quick else 224)
    env = environment()
    print(f"torch {env['torch']}, {env['threads']} threads, {env['cpu']}")
    tables = list(conv_tables(args.batch, args.quick, verbose=True))
    tables.append(pool_table(args.batch, "quick" if args.quick else "full"))
    tables.append(resnet_step(args.batch, image, args.quick))
    for t in tables:
        print()
        print(t.format())


if __name__ == "__main__":
    main()
