"""The bench suites, one module each (the interface: benchmarks/cli.py)."""
