"""benchmarks.suites.model --rounds: the set-ups' order reverses every other round, and the
summary gives each set-up's median and range over the rounds and its ratio within each round."""
import contextlib
import io

import expecttest

from benchmarks.suites import model


def _result(ms):
    return dict(step_ms=ms, min_ms=ms, max_ms=ms, tok_s=1000 / ms, peak_gib=None, loss0=1.0)


class TestRounds(expecttest.TestCase):
    def test_summary_over_rounds(self):
        rounds = [{"compile": _result(10.0), "mytorch+compile": _result(8.0)},
                  {"compile": _result(12.0), "mytorch+compile": _result(12.0)},
                  {"compile": _result(11.0), "mytorch+compile": _result(10.0)}]
        self.assertExpectedInline(model.rounds_markdown(rounds), """\
| setup | step ms over 3 rounds: median (min..max) | vs compile per round: median (min..max) |
|---|---|---|
| compile | 11.0 (10.0..12.0) | 1.00x (1.00..1.00) |
| mytorch+compile | 10.0 (8.0..12.0) | 1.10x (1.00..1.25) |""")

    def test_order_reverses_every_other_round(self):
        spec = model.Spec(1, 32, 2, 8, 1, vocab=64, intermediate=64)
        ran = []

        def fake_process(name, spec, device, dtype, warmup, steps):
            ran.append(name)
            return _result(1.0 + len(ran))

        real = model.run_setup_process
        model.run_setup_process = fake_process
        try:
            rounds = model.measure_rounds(spec, ["eager", "mytorch"], "cpu", None, 1, 1, 3)
        finally:
            model.run_setup_process = real
        self.assertEqual(ran, ["eager", "mytorch", "mytorch", "eager", "eager", "mytorch"])
        self.assertEqual([list(r) for r in rounds], [["eager", "mytorch"]] * 3)
        self.assertEqual([r["eager"]["step_ms"] for r in rounds], [2.0, 5.0, 6.0])

    def test_two_real_rounds_on_the_cpu(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            model.main(["--device", "cpu", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "8",
                        "--batch", "1", "--vocab", "64", "--steps", "1", "--warmup", "1",
                        "--setups", "eager,mytorch", "--rounds", "2"])
        text = out.getvalue()
        self.assertIn("round 1 of 2 (eager, mytorch)", text)
        self.assertIn("round 2 of 2 (mytorch, eager)", text)
        summary = text.split("over the rounds")[1].splitlines()
        self.assertEqual(summary[1], "| setup | step ms over 2 rounds: median (min..max) | "
                                     "vs eager per round: median (min..max) |")
        self.assertTrue(summary[3].startswith("| eager | ") and summary[3].endswith("| 1.00x (1.00..1.00) |"),
                        summary[3])
        self.assertTrue(summary[4].startswith("| mytorch | "), summary[4])

    def test_rounds_must_be_positive(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
            model.main(["--device", "cpu", "--rounds", "0", "--setups", "eager"])
        self.assertIn("--rounds takes a count of at least 1, got 0", err.getvalue())
