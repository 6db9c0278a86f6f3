"""mytorch's benchmarks: side-by-side speed comparisons with what users would pick instead.

    python -m mytorch_ext bench [SUITE ...]   (or python -m benchmarks, from the checkout root)

- suites/: one module per suite (attention, cpu, device, kvcache, model, norms, overhead,
  standalone); some also run on their own for a closer look (`python -m benchmarks.suites.X`).
- timing.py: the one timing module every suite and tool times through.
- common.py: the checks, result tables, environment and JSON/PNG outputs.
- cli.py, charts.py: the `bench` and `bench charts` commands.
- isa_builds.py: the same ops in several builds of the extension.
- results/: the raw logs and charts that docs/ quotes.

The folder lives in the source checkout beside the package; wheels carry only mytorch_ext
and mytorch, and their `bench` command says so in one line.
"""
