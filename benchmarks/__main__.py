"""python -m benchmarks ...: the same as `python -m mytorch_ext bench ...` in a checkout."""
import sys

from .cli import main

sys.exit(main())
