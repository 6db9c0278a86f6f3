"""The bench charts (grouped bars from 0 with the ratio on each peer bar) and the timing
spread report (one warning per kind and process)."""
import pytest

from mytorch_ext.bench import common
from mytorch_ext.bench.common import Table

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
    monkeypatch.setattr(common, "_warned", set())
    monkeypatch.setattr(common.os, "getloadavg", lambda: (99.0, 0.0, 0.0))
    common.take_spread()
    common.record_times([0.010, 0.030, 0.040])
    t = _table([("a", {"mytorch": 1.0, "aten": 1.0, "other": 1.0})])
    paths = common.write_outputs(str(tmp_path), "s1", [t])
    out, err = capsys.readouterr()
    assert "timing spread: 1 measurements" in out and "10.000/30.000/40.000 ms" in out
    assert err.count("WARNING: timings vary widely") == 1 and err.count("WARNING: load average") == 1
    assert [p.endswith(x) for p, x in zip(paths, ["s1.json", "s1_0.png"])] == [True, True]
    common.record_times([0.010, 0.030, 0.040])
    common.write_outputs(str(tmp_path), "s2", [t])
    out, err = capsys.readouterr()
    assert "timing spread" in out and "WARNING" not in err  # once per process
