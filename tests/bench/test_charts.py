"""The bench charts (grouped bars from 0 with the ratio on each peer bar) and the timing
spread report (one warning per kind and process)."""
import tempfile

import pytest

from benchmarks import common, timing
from benchmarks.common import Table

plt = pytest.importorskip("matplotlib.pyplot")


def _table(rows, higher=True):
    t = Table("demo", "GB/s" if higher else "ms", "test", ["mytorch", "aten", "other"],
              higher_is_better=higher)
    for label, vals in rows:
        t.add(label, vals)
    return t


def test_grouped_bars_from_zero_with_ratios():
    t = _table([("a", {"mytorch": 4.0, "aten": 2.0, "other": 8.0}),
                ("b", {"mytorch": 3.0, "aten": 3.0, "other": 1.0})])
    fig = common.chart(t, plt)
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 3  # one bar per (row, impl)
    assert ax.get_ylim()[0] == 0
    texts = sorted(x.get_text() for x in ax.texts)
    assert texts == sorted(["2.00x", "0.50x", "1.00x", "3.00x"])
    assert "higher is better" in ax.get_ylabel() and "higher is better" in ax.get_title()
    plt.close(fig)


def test_one_row_is_one_bar_group_and_lower_is_better():
    t = _table([("N=512", {"mytorch": 2.0, "aten": 4.0, "other": 6.0})], higher=False)
    fig = common.chart(t, plt)
    ax = fig.axes[0]
    assert len(ax.patches) == 3 and len(ax.get_xticks()) == 1
    assert sorted(x.get_text() for x in ax.texts) == ["2.00x", "3.00x"]
    assert "lower is better" in ax.get_title()
    plt.close(fig)


def test_spread_reported_and_warned_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(timing, "_warned", set())
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (99.0, 0.0, 0.0))
    timing.take_spread()
    timing.record_times([0.010, 0.030, 0.040])
    t = _table([("a", {"mytorch": 1.0, "aten": 1.0, "other": 1.0})])
    paths = common.write_outputs(str(tmp_path), "s1", [t])
    out, err = capsys.readouterr()
    assert "timing spread: 1 measurements" in out and "10.000/30.000/40.000 ms" in out
    assert err.count("WARNING: timings vary widely") == 1 and err.count("WARNING: load average") == 1
    assert [p.endswith(x) for p, x in zip(paths, ["s1.json", "s1_0.png"])] == [True, True]
    timing.record_times([0.010, 0.030, 0.040])
    common.write_outputs(str(tmp_path), "s2", [t])
    out, err = capsys.readouterr()
    assert "timing spread" in out and "WARNING" not in err  # once per process


# ---- `python -m mytorch_ext bench charts`: one chart per suite, named after the hardware ----
from benchmarks import charts  # noqa: E402


@pytest.mark.parametrize("name, tag", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"), ("NVIDIA L40S", "l40s"), ("AMD Instinct MI300X", "mi300x")])
def test_gpu_tags(name, tag):
    assert charts.gpu_slug(name) == tag


@pytest.mark.parametrize("name, tag", [
    ("Intel(R) Xeon(R) Processor", "cpu-xeon"), ("AMD EPYC 7763 64-Core Processor", "cpu-epyc-7763"),
    ("Intel(R) Xeon(R) Platinum 8480+", "cpu-xeon-8480"), ("Intel(R) Core(TM) i9-13900K", "cpu-core-i9"),
    ("", "cpu")])
def test_cpu_tags(name, tag):
    assert charts.cpu_slug(name) == tag


def test_suite_figure_has_a_panel_per_table_and_json_round_trips():
    a = _table([("a", {"mytorch": 4.0, "aten": 2.0, "other": 8.0})])
    b = _table([("x", {"mytorch": 1.0, "aten": 3.0, "other": None}),
                ("y", {"mytorch": 2.0, "aten": 1.0, "other": 1.0})], higher=False)
    empty = _table([])
    back = charts.tables_from_json({"tables": [t.to_json() for t in (a, b, empty)]})
    assert [(t.title, t.unit, t.higher_is_better, t.rows) for t in back] == \
        [(t.title, t.unit, t.higher_is_better, t.rows) for t in (a, b, empty)]
    fig = charts.suite_figure(back, plt, "suite on hardware")
    assert len(fig.axes) == 2 and fig._suptitle.get_text() == "suite on hardware"
    assert [len(ax.patches) for ax in fig.axes] == [3, 6]
    assert all(ax.get_ylim()[0] == 0 for ax in fig.axes)
    assert sorted(x.get_text() for x in fig.axes[1].texts) == ["0.50x", "0.50x", "3.00x"]
    plt.close(fig)


def test_charts_command_writes_png_table_and_json_per_suite(tmp_path, capsys):
    rc = charts.main(["--smoke", "--device", "cpu", "--out", str(tmp_path), "standalone"])
    out = capsys.readouterr().out
    assert rc == 0, out
    tag = charts.cpu_slug(common._cpu_model())
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{tag}_standalone.{e}" for e in ("json", "png", "txt")]
    text = (tmp_path / f"{tag}_standalone.txt").read_text()
    assert text.startswith("$ python -m mytorch_ext bench standalone --smoke --device cpu\n")
    assert "training step (AdamW) on cpu, standalone mytorch vs torch eager" in text
    assert (tmp_path / f"{tag}_standalone.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[charts] done: 1 PNG in" in out
    assert tempfile.gettempdir() not in text and " -> " not in text  # no temporary paths


def test_charts_command_rejects_unknown_suites(capsys):
    with pytest.raises(SystemExit):
        charts.main(["nosuch"])
    assert "unknown suite(s) nosuch" in capsys.readouterr().err


def test_a_suite_that_cannot_run_is_skipped_not_failed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MYTORCH_DEVICE", "0")  # the device suite then has no device to run on
    rc = charts.main(["--smoke", "--device", "cpu", "--out", str(tmp_path), "device"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "[device] skipped on cpu: the mytorch device is not registered" in out
    assert "[charts] device: skipped, no chart" in out and list(tmp_path.iterdir()) == []
