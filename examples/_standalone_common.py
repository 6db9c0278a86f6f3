"""Shared by the standalone examples: the digits data, a progress bar, a loss-curve plot,
one optimizer step, the digits training loop and command line."""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

# Where the examples write their files unless --out says otherwise: under the current
# directory, never inside the source tree.
DEFAULT_OUT = "mytorch-out"


def add_out_argument(ap, what: str) -> None:
    """The --out option every example takes; `what` says what it writes there."""
    ap.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                    help=f"folder for this example's output ({what}); default: ./{DEFAULT_OUT}")


def digits(image: bool, seed: int = 0):
    """scikit-learn's 8x8 digits, scaled to [0, 1], split 80/20 (stratified, seeded)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)
    x = x[:, None] if image else x.reshape(len(x), -1)
    return train_test_split(x, d.target.astype(np.int64), test_size=0.2, random_state=seed,
                            stratify=d.target)


def progress(total: int, desc: str, quiet: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=quiet, leave=False)


def plot_losses(losses, path: str, title: str, extra=None) -> str:
    """A loss-curve PNG (per-step loss plus a moving average)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(losses, alpha=0.35, label="step loss")
    k = max(1, len(losses) // 30)
    if len(losses) >= k:
        smooth = np.convolve(losses, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(k - 1, len(losses)), smooth, label=f"mean of {k}")
    if extra:
        for label, value in extra.items():
            ax.axhline(value, linestyle="--", color="gray")
            ax.text(0, value, label, va="bottom", fontsize=8)
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def optimizer_step(loss, opt, sched, losses: list, bar, clip: float | None = None) -> None:
    """Backward through loss, clip the gradients' norm to clip (if given), step the optimizer
    and its schedule; record the loss and show it on the progress bar."""
    import mytorch

    opt.zero_grad()
    loss.backward()
    if clip is not None:
        mytorch.optim.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], clip)
    opt.step()
    sched.step()
    losses.append(loss.item())
    bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    bar.update()


def accuracy(model, x, y) -> float:
    """Test accuracy of a standalone mytorch classifier on numpy inputs."""
    import mytorch

    model.eval()
    with mytorch.no_grad():
        pred = model(mytorch.tensor(x)).argmax(dim=1).numpy()
    model.train()
    return float((pred == y).mean())


def fit_digits(make_model, *, image: bool, name: str, epochs: int, batch_size: int = 64,
               lr: float = 3e-3, seed: int = 0, quiet: bool = False, plot: bool = True,
               out: str | None = None) -> dict:
    """Seed, build make_model(), train it with AdamW + cosine warm-up on the digits split and
    report test accuracy, seconds, per-step losses and the loss-curve PNG (if plot)."""
    import mytorch
    import mytorch.functional as F
    from mytorch.data import DataLoader, TensorDataset

    mytorch.manual_seed(seed)
    xtr, xte, ytr, yte = digits(image=image, seed=seed)
    model = make_model()
    opt = mytorch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size, shuffle=True, seed=seed)
    sched = mytorch.optim.CosineWithWarmup(opt, warmup_steps=20, total_steps=epochs * len(loader))
    losses, t0 = [], time.perf_counter()
    bar = progress(epochs * len(loader), name, quiet)
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer_step(F.cross_entropy(model(xb), yb), opt, sched, losses, bar)
    bar.close()
    seconds = time.perf_counter() - t0
    acc = accuracy(model, xte, yte)
    png = None
    if plot:
        png = plot_losses(losses, os.path.join(out or DEFAULT_OUT, f"standalone_{name.replace(' ', '_').lower()}.png"),
                          f"{name}: test accuracy {acc:.1%}")
    return {"accuracy": acc, "seconds": seconds, "losses": losses, "plot": png}


def digits_main(doc: str, train, name: str, epochs: int) -> None:
    """The command line of a digits example: --epochs and --out, then one line of results."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=epochs)
    add_out_argument(ap, "the loss-curve PNG")
    args = ap.parse_args()
    r = train(epochs=args.epochs, out=args.out)
    print(f"{name}: test accuracy {r['accuracy']:.2%} after {args.epochs} epochs, "
          f"{r['seconds']:.1f} s of training; loss curve: {r['plot']}")
