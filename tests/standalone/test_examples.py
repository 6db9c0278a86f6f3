"""Quick runs of the standalone examples, asserting what their docs claim."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name):
    path = os.path.join(ROOT, "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_mlp_reaches_95_percent():
    r = load("standalone_digits_mlp").train(epochs=15, quiet=True, plot=False)
    assert r["accuracy"] >= 0.95, r["accuracy"]
    assert r["losses"][-1] < r["losses"][0] / 5


def test_digits_cnn_reaches_97_percent():
    r = load("standalone_digits_cnn").train(epochs=8, quiet=True, plot=False)
    assert r["accuracy"] >= 0.97, r["accuracy"]


def test_char_gpt_beats_unigram_entropy():
    r = load("standalone_char_gpt").train(steps=150, dim=64, layers=2, batch_size=16,
                                          sample_chars=40, quiet=True, plot=False)
    # the unigram entropy is what a model that ignores context reaches (about 3.2 nats)
    assert r["val_loss"] < r["unigram_entropy"] - 0.5, (r["val_loss"], r["unigram_entropy"])
    assert r["sample"].startswith("KING LEAR:\n") and len(r["sample"]) == len("KING LEAR:\n") + 40


@pytest.mark.slow
def test_full_examples_meet_their_claims(tmp_path):
    r = load("standalone_digits_mlp").train(quiet=True)
    assert r["accuracy"] >= 0.95 and os.path.exists(r["plot"])
    r = load("standalone_digits_cnn").train(quiet=True)
    assert r["accuracy"] >= 0.97 and os.path.exists(r["plot"])
    r = load("standalone_char_gpt").train(quiet=True)
    assert r["val_loss"] < r["unigram_entropy"] - 1.0 and os.path.exists(r["plot"])
