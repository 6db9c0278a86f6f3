"""`python -m mytorch_ext bench device` prints torch.compile against eager on the device: a
training row and an inference row for each of the device tests' MLP, CNN and GPT. Smoke
shapes; nothing here asserts a speed, only that every cell is a measured time."""
import contextlib
import io
import json
import os
import re
import tempfile

import pytest
import torch

import mytorch_ext  # noqa: F401
from benchmarks import cli

pytestmark = pytest.mark.usefixtures("free_compiled_state")

TITLE = "torch.compile on the mytorch device vs eager on the device, fp32"


def test_bench_device_prints_the_compiled_rows():
    with tempfile.TemporaryDirectory() as tmp:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = cli.main(["device", "--smoke", "--device", "mytorch", "--out", tmp])
        stdout = out.getvalue()
        assert rc == 0, stdout
        with open(os.path.join(tmp, "device.json")) as f:
            tables = json.load(f)["tables"]
    table = next(t for t in tables if t["title"] == TITLE)
    assert table["impls"] == ["compiled", "eager"] and table["unit"] == "ms"
    labels = [r["shape"] for r in table["rows"]]
    assert [re.sub(r" .*, ", " ", s) for s in labels] == [
        "MLP train", "MLP inference", "CNN train", "CNN inference", "GPT train", "GPT inference"]
    for row in table["rows"]:
        for impl in ("compiled", "eager"):
            assert 0 < row[f"{impl}_min"] <= row[impl] <= row[f"{impl}_max"], row
        assert abs(row["x_eager"] - row["eager"] / row["compiled"]) < 1e-9 * row["x_eager"]
    # the printed table: its title, and one line per row with the speed-up
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(TITLE))
    assert re.sub(r"\s+", " ", lines[start + 1]) == "shape | compiled | eager | x eager"
    for label, line in zip(labels, lines[start + 3:start + 3 + len(labels)]):
        cells = [c.strip() for c in line.split("|")]
        assert cells[0] == label
        assert re.fullmatch(r"[\d.]+ \([\d.]+\.\.[\d.]+\)", cells[1]), line
        assert re.fullmatch(r"[\d.]+x", cells[3]), line
