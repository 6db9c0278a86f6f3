"""python -m mytorch_ext [--version | info | bench ...]; mytorch-bench is `bench`."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":  # everything after `bench` is the bench CLI's, -h included
        return bench_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m mytorch_ext")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("command", nargs="?", choices=["info", "bench"], help="what to run")
    args, rest = parser.parse_known_args(argv)
    if args.version:
        from . import __version__

        print(f"mytorch_ext {__version__}")
        return 0
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "info" or args.command is None:
        from . import build_info

        for k, v in build_info().items():
            print(f"{k:>18}: {v}")
        return 0
    return 2


def bench_main(argv=None) -> int:
    """The mytorch-bench console script: the same as `python -m mytorch_ext bench ...` (the
    suites are in the source checkout's benchmarks/: _bench.py finds them)."""
    from ._bench import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
