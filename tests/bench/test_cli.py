"""`python -m mytorch_ext bench` (benchmarks/): every suite that runs on the CPU, at tiny shapes (--smoke).

Checks what the CLI writes (JSON fields, PNG plots), pins the table headers, and checks the
one-line skips. Nothing here asserts a speed: the values are only checked to be real numbers.
"""
import contextlib
import io
import json
import math
import os
import re
import tempfile
import unittest

import expecttest
import torch

from benchmarks import cli, common, timing

CPU_SUITES = ["attention", "cpu", "device", "kvcache", "model", "norms", "overhead", "standalone"]
# Where a CUDA GPU is present the mytorch device is not registered at import (see
# mytorch_ext.device.register_at_import): the device suite then says so in one line.
DEVICE_REGISTERED = hasattr(torch, "mytorch")
RUN_SUITES = [s for s in CPU_SUITES if s != "device" or DEVICE_REGISTERED]
DEVICE_TABLE = """\
training step (AdamW): mytorch device vs CPU  [ms, lower is better: median step time; x PEER = mytorch_device's speed-up over PEER, >1: mytorch_device better]
shape | mytorch_device | cpu | x cpu
torch.compile on the mytorch device vs eager on the device, fp32  [ms, lower is better: median (min..max) time per call; training: AdamW step, compiled = model+loss and optimizer.step compiled; x PEER = compiled's speed-up over PEER, >1: compiled better]
shape | compiled | eager | x eager
"""


def run_cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(argv)
    return rc, out.getvalue()


def table_headers(stdout):
    """Title and column lines of every printed table, whitespace collapsed."""
    lines = stdout.splitlines()
    heads = []
    for i, line in enumerate(lines[:-1]):
        if line == "" and i + 2 < len(lines) and lines[i + 2].startswith("shape"):
            heads += [lines[i + 1], re.sub(r"\s+", " ", lines[i + 2])]
    return "\n".join(heads)


def check_json(test, out_dir, suite, device):
    with open(os.path.join(out_dir, f"{suite}.json")) as f:
        data = json.load(f)
    test.assertEqual((data["suite"], data["device"], data["mode"]), (suite, device, "smoke"))
    env = data["environment"]
    test.assertEqual(env["torch"], torch.__version__)
    test.assertEqual(env["threads"], torch.get_num_threads())
    test.assertEqual(env["cuda"], torch.version.cuda)
    test.assertIn("triton", env)
    test.assertTrue(env["cpu"])
    test.assertTrue(data["tables"])
    for t in data["tables"]:
        test.assertTrue(t["rows"], t["title"])
        for row in t["rows"]:
            for impl in t["impls"]:
                v = row[impl]
                test.assertTrue(math.isfinite(v) and v > 0, (t["title"], row["shape"], impl, v))
            for peer in t["impls"][1:]:
                r = row[f"x_{peer}"]
                test.assertTrue(math.isfinite(r) and r > 0, (t["title"], row["shape"], peer, r))
                a, b = row[t["impls"][0]], row[peer]
                test.assertAlmostEqual(r, a / b if t["higher_is_better"] else b / a, places=6)
    return data


class TestTable(expecttest.TestCase):
    def test_ratio_is_mytorch_speedup(self):
        times = common.Table("step", "ms", "median step time", ["mytorch", "aten"], higher_is_better=False)
        times.add("a", {"mytorch": 1.0, "aten": 3.0})
        rates = common.Table("rate", "GB/s", "bytes / time", ["mytorch", "aten"])
        rates.add("a", {"mytorch": 30.0, "aten": 10.0})
        memory = common.Table("peak", "GiB", "max allocated", ["mytorch", "eager"], higher_is_better=False)
        memory.add("a", {"mytorch": 2.0, "eager": 4.0})
        self.assertEqual(times.ratio(times.rows[0][1]), 3.0)
        self.assertEqual(rates.ratio(rates.rows[0][1]), 3.0)
        self.assertExpectedInline("\n\n".join(t.format() for t in (times, rates, memory)), """\
step  [ms, lower is better: median step time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape |        mytorch |           aten |       x aten
------+----------------+----------------+-------------
a     |           1.00 |           3.00 |        3.00x

rate  [GB/s, higher is better: bytes / time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape |        mytorch |           aten |       x aten
------+----------------+----------------+-------------
a     |          30.00 |          10.00 |        3.00x

peak  [GiB, lower is better: max allocated; x PEER = mytorch's saving over PEER, >1: mytorch better]
shape |        mytorch |          eager |      x eager
------+----------------+----------------+-------------
a     |           2.00 |           4.00 |        2.00x""")

    def test_rotation_only_when_inputs_fit_in_cache(self):
        small = (torch.randn(256), torch.randn(256, requires_grad=True))
        sets = timing.rotated(small, "cpu")
        self.assertGreater(len(sets), 1)
        for copy in sets[1:]:
            self.assertEqual(copy[0].data_ptr() != small[0].data_ptr(), True)
            torch.testing.assert_close(copy[0], small[0])
            self.assertTrue(copy[1].requires_grad and copy[1].is_leaf)
        big = (torch.empty(4 * timing.cache_bytes("cpu") // 4 + 1),)
        self.assertEqual(len(timing.rotated(big, "cpu")), 1)


class TestBenchCLI(expecttest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.rc, cls.stdout = run_cli(["--smoke", "--device", "cpu", "--out", cls.tmp.name])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_cpu_suite_runs(self):
        self.assertEqual(self.rc, 0, self.stdout)
        self.assertEqual(cli.available_suites(), CPU_SUITES)
        for suite in RUN_SUITES:
            self.assertRegex(self.stdout, rf"\[{suite}\] done in ")
        if not DEVICE_REGISTERED:
            self.assertIn("[device] skipped on cpu: the mytorch device is not registered", self.stdout)

    def test_json_and_png_outputs(self):
        for suite in RUN_SUITES:
            data = check_json(self, self.tmp.name, suite, "cpu")
            for k in range(len(data["tables"])):
                with open(os.path.join(self.tmp.name, f"{suite}_{k}.png"), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_model_suite_columns(self):
        """Every set-up has its column (each ran in its own process and its first loss
        matched eager's, or the suite would have failed); Liger-Kernel is CUDA only."""
        with open(os.path.join(self.tmp.name, "model.json")) as f:
            tables = json.load(f)["tables"]
        setups = ["mytorch", "eager", "compile", "mytorch+compile"]
        self.assertEqual([t["impls"] for t in tables],
                         [setups, ["mytorch+compile", "compile", "eager"], setups])
        self.assertEqual([t["unit"] for t in tables], ["ms", "ms", "tokens/s"])
        for row in tables[0]["rows"]:
            for s in setups:
                self.assertTrue(0 < row[f"{s}_min"] <= row[s] <= row[f"{s}_max"], (s, row))
        self.assertIn("[model] no Liger-Kernel column: Liger-Kernel runs on CUDA only", self.stdout)

    def test_overhead_suite_rows(self):
        """A row per routed op, forward and forward+backward, with positive times (min <=
        median <= max) and the mytorch / ATen ratio."""
        from benchmarks.suites import overhead as suite_overhead

        with open(os.path.join(self.tmp.name, "overhead.json")) as f:
            tables = json.load(f)["tables"]
        labels = [c.label for c in suite_overhead.cases("cpu")]
        self.assertEqual(len(labels), len(set(labels)))
        ops = {c.op for c in suite_overhead.cases("cpu")}
        self.assertTrue({"sdpa", "flash_attn", "attention", "rms_norm", "layer_norm", "softmax",
                         "log_softmax", "gelu", "gelu tanh", "swiglu", "rope", "cross_entropy",
                         "fused_linear_cross_entropy", "fused_cross_entropy"} <= ops, ops)
        self.assertEqual(len(tables), 2)
        for t in tables:
            self.assertEqual((t["unit"], t["impls"]), ("us", ["mytorch", "aten"]))
            self.assertEqual([r["shape"] for r in t["rows"]], labels)
            for row in t["rows"]:
                for impl in ("mytorch", "aten"):
                    self.assertTrue(0 < row[f"{impl}_min"] <= row[impl] <= row[f"{impl}_max"], row)
                self.assertAlmostEqual(row["mytorch_over_aten"], row["mytorch"] / row["aten"], places=6)

    def test_table_headers(self):
        headers = table_headers(self.stdout)
        if not DEVICE_REGISTERED:  # the pinned list below has the device table in its place
            i = headers.index("decode attention step")
            headers = headers[:i] + DEVICE_TABLE + headers[i:]
        self.assertExpectedInline(headers, """\
CPU attention fwd, fp32, B=1 H=2 D=32  [GFLOP/s, higher is better: 4*B*H*N^2*D, /2 causal; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten_flash | aten_math | x aten_flash | x aten_math
CPU attention fwd+bwd, fp32, B=1 H=2 D=32  [GFLOP/s, higher is better: 4*B*H*N^2*D, /2 causal, x3.5; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten_flash | aten_math | x aten_flash | x aten_math
sgemm (mm), fp32  [GFLOP/s, higher is better: 2*M*N*K / median time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten | x aten
memory-bound kernels, fp32, 4096 elements  [GB/s, higher is better: min bytes (inputs read once, output written once) / median time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten | x aten
conv2d forward, ResNet-18 layers, N=1  [GFLOP/s, higher is better: 2*N*O*OH*OW*C*kH*kW / t; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten | x aten
conv2d backward (grad input + weight), N=1  [GFLOP/s, higher is better: 2 x forward FLOP / t; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten | x aten
max_pool2d forward, N=1  [GB/s, higher is better: bytes of x, y and the indices / t; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten | x aten
training step (AdamW): mytorch device vs CPU  [ms, lower is better: median step time; x PEER = mytorch_device's speed-up over PEER, >1: mytorch_device better]
shape | mytorch_device | cpu | x cpu
torch.compile on the mytorch device vs eager on the device, fp32  [ms, lower is better: median (min..max) time per call; training: AdamW step, compiled = model+loss and optimizer.step compiled; x PEER = compiled's speed-up over PEER, >1: compiled better]
shape | compiled | eager | x eager
decode attention step, float32, cpu  [us, lower is better: median time of one step: append 1 token + attend (mytorch), attend the same cache (SDPA); x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten_sdpa | x aten_sdpa
decode attention step, bfloat16, cpu  [us, lower is better: median time of one step: append 1 token + attend (mytorch), attend the same cache (SDPA); x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten_sdpa | x aten_sdpa
generate(), Llama 2 layers d128 GQA 4:2, batch 2, 32-token prompt + 8 new, cpu  [tokens/s, higher is better: new tokens / seconds of one greedy generate() call, prompt included; median of 1 after a warm-up, the set-ups' calls alternating (static cache: in a row each); tokens equal: the share of new tokens equal to sdpa's; argmax agreement: the share of each set-up's new tokens that the sdpa model's argmax picks from the same prefix in one forward pass; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | sdpa | x sdpa
Llama training step on cpu, fp32, AdamW, each set-up in its own process  [ms, lower is better: median step time (min..max); x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | eager | compile | mytorch+compile | x eager | x compile | x mytorch+compile
Llama training step under torch.compile on cpu, fp32, AdamW, each set-up in its own process  [ms, lower is better: median step time; x PEER = mytorch+compile's speed-up over PEER, >1: mytorch+compile better]
shape | mytorch+compile | compile | eager | x compile | x eager
Llama training throughput on cpu, fp32, AdamW, each set-up in its own process  [tokens/s, higher is better: batch*seq / median step time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | eager | compile | mytorch+compile | x eager | x compile | x mytorch+compile
fused kernels, fp32, forward, 64x256  [GB/s, higher is better: min bytes (inputs read once, outputs written once) / time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | aten_eager | x aten_eager
host time per call, forward, fp32, tiny shapes, cpu, 1 thread  [us, lower is better: host time per call, median of 3 repeats of 5 calls; mytorch/PEER = host-time ratio, <1: mytorch cheaper]
shape | mytorch us (min..max) | aten us (min..max) | mytorch/aten
host time per call, forward+backward, fp32, tiny shapes, cpu, 1 thread  [us, lower is better: host time per call, median of 3 repeats of 5 calls; mytorch/PEER = host-time ratio, <1: mytorch cheaper]
shape | mytorch us (min..max) | aten us (min..max) | mytorch/aten
training step (AdamW) on cpu, standalone mytorch vs torch eager  [ms, lower is better: median step time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
shape | mytorch | torch | x torch""")


class TestBenchDevices(expecttest.TestCase):
    @unittest.skipIf(torch.cuda.is_available(), "a CUDA GPU is present")
    def test_cuda_without_gpu_skips_in_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, stdout = run_cli(["--device", "cuda", "--out", tmp])
            self.assertEqual(os.listdir(tmp), [])
        self.assertEqual(rc, 0)
        self.assertExpectedInline("\n".join(stdout.splitlines()[1:]), """\
[attention] skipped on cuda: no CUDA GPU is available (torch.cuda.is_available() is False)
[cpu] skipped on cuda: the cpu suite times the OpenMP CPU kernels (use --device cpu or mytorch)
[device] skipped on cuda: the device suite compares the mytorch device with the CPU (use --device mytorch)
[kvcache] skipped on cuda: no CUDA GPU is available (torch.cuda.is_available() is False)
[model] skipped on cuda: no CUDA GPU is available (torch.cuda.is_available() is False)
[norms] skipped on cuda: no CUDA GPU is available (torch.cuda.is_available() is False)
[overhead] skipped on cuda: no CUDA GPU is available (torch.cuda.is_available() is False)
[standalone] skipped on cuda: no CUDA GPU is available (torch.cuda.is_available() is False)""")

    @unittest.skipUnless(hasattr(torch, "mytorch"), "the mytorch device is not registered")
    def test_mytorch_device(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, stdout = run_cli(["--smoke", "--device", "mytorch", "--out", tmp])
            self.assertEqual(rc, 0, stdout)
            for suite in CPU_SUITES:
                if suite != "overhead":
                    check_json(self, tmp, suite, "mytorch")
            self.assertIn("[overhead] skipped on mytorch: ", stdout)
        titles = table_headers(stdout).splitlines()[::2]
        self.assertExpectedInline("\n".join(titles), """\
CPU attention fwd, fp32, B=1 H=2 D=32, mytorch on the mytorch device, SDPA on the CPU  [GFLOP/s, higher is better: 4*B*H*N^2*D, /2 causal; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
CPU attention fwd+bwd, fp32, B=1 H=2 D=32, mytorch on the mytorch device, SDPA on the CPU  [GFLOP/s, higher is better: 4*B*H*N^2*D, /2 causal, x3.5; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
sgemm (mm), fp32, mytorch on the mytorch device  [GFLOP/s, higher is better: 2*M*N*K / median time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
memory-bound kernels, fp32, 4096 elements, mytorch on the mytorch device  [GB/s, higher is better: min bytes (inputs read once, output written once) / median time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
conv2d forward, ResNet-18 layers, N=1, mytorch on the mytorch device  [GFLOP/s, higher is better: 2*N*O*OH*OW*C*kH*kW / t; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
conv2d backward (grad input + weight), N=1, mytorch on the mytorch device  [GFLOP/s, higher is better: 2 x forward FLOP / t; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
max_pool2d forward, N=1, mytorch on the mytorch device  [GB/s, higher is better: bytes of x, y and the indices / t; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
training step (AdamW): mytorch device vs CPU  [ms, lower is better: median step time; x PEER = mytorch_device's speed-up over PEER, >1: mytorch_device better]
torch.compile on the mytorch device vs eager on the device, fp32  [ms, lower is better: median (min..max) time per call; training: AdamW step, compiled = model+loss and optimizer.step compiled; x PEER = compiled's speed-up over PEER, >1: compiled better]
decode attention step, float32, the mytorch device (SDPA on the CPU)  [us, lower is better: median time of one step: append 1 token + attend (mytorch), attend the same cache (SDPA); x PEER = mytorch's speed-up over PEER, >1: mytorch better]
decode attention step, bfloat16, the mytorch device (SDPA on the CPU)  [us, lower is better: median time of one step: append 1 token + attend (mytorch), attend the same cache (SDPA); x PEER = mytorch's speed-up over PEER, >1: mytorch better]
Llama training step on mytorch, fp32, AdamW, stock model on the mytorch device vs on the CPU  [ms, lower is better: median step time (min..max); x PEER = mytorch_device's speed-up over PEER, >1: mytorch_device better]
Llama training throughput on mytorch, fp32, AdamW, stock model on the mytorch device vs on the CPU  [tokens/s, higher is better: batch*seq / median step time; x PEER = mytorch_device's speed-up over PEER, >1: mytorch_device better]
fused kernels, fp32, forward, 64x256, mytorch on the mytorch device, ATen on the CPU  [GB/s, higher is better: min bytes (inputs read once, outputs written once) / time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]
training step (AdamW) on mytorch, standalone mytorch vs torch eager  [ms, lower is better: median step time; x PEER = mytorch's speed-up over PEER, >1: mytorch better]""")

    @unittest.skipIf(torch.cuda.is_available(), "a CUDA GPU is present")
    def test_gpu_scripts_without_gpu_say_so_in_one_line(self):
        from benchmarks.suites import attention, model, norms

        for mod, argv in ((norms, []), (attention, []), (attention, ["--configs"])):
            with self.assertRaises(SystemExit) as e:
                mod.main(argv)
            self.assertEqual(str(e.exception), f"{mod.__name__} needs a CUDA GPU")
        for argv, what in ((["--profile"], "--profile"), (["--device", "cuda"], "--device cuda")):
            with self.assertRaises(SystemExit) as e:
                model.main(argv)
            self.assertEqual(str(e.exception), f"benchmarks.suites.model: {what} needs a CUDA GPU")

    def test_cuda_fused_arguments_checked_before_the_gpu(self):
        from benchmarks.suites import norms as cuda_fused

        ops = "rms_norm, layer_norm, softmax, log_softmax, bias_gelu, swiglu, rope"
        for argv, want in ((["--sizes", "4096x"], "--sizes takes positive ROWSxCOLS pairs separated by commas, got '4096x'"),
                           (["--sizes", "0x1024"], "--sizes takes positive ROWSxCOLS pairs separated by commas, got '0x1024'"),
                           (["--timing", "wall"], "--timing takes graph and/or call, got 'wall'"),
                           (["--ops", "gelu"], f"--ops takes {ops}, got 'gelu'"),
                           (["--only", "sweep,nosuch"], "--only takes ops, sweep, ce, flce, optim, got 'nosuch'")):
            with self.assertRaises(SystemExit) as e:
                cuda_fused.main(argv)
            self.assertEqual(str(e.exception), "benchmarks.suites.norms: " + want)
        args = cuda_fused.parse_args(["--sizes", "4096x24576,8x8", "--only", "sweep", "--ops", "rms_norm"])
        self.assertEqual((args.sizes, args.only, args.ops), ([(4096, 24576), (8, 8)], ["sweep"], ["rms_norm"]))
        self.assertEqual(cuda_fused.parse_args([]).sizes, list(cuda_fused.SWEEP_SIZES))

    def test_unknown_suite(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
            cli.main(["nosuch"])
        self.assertExpectedInline(err.getvalue().splitlines()[-1], """python -m mytorch_ext bench: error: unknown suite(s) nosuch; valid: attention, cpu, device, kvcache, model, norms, overhead, standalone""")


if __name__ == "__main__":
    unittest.main()
