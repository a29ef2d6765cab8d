"""
Run every benchmark module and print one table.

    python -m benchmarks            # everything
    python -m benchmarks --quick    # fewer rounds and sizes, for a smoke run
    python -m benchmarks tokens     # only bench_tokens.py (names may repeat)
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import platform
import sys
import time
from pathlib import Path

from benchmarks._harness import Table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("only", nargs="*", help="module names without the bench_ prefix")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and sizes")
    args = parser.parse_args(argv)

    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if args.only:
        wanted = {f"bench_{n.removeprefix('bench_')}" for n in args.only}
        unknown = wanted - set(names)
        if unknown:
            print(f"unknown benchmark module(s): {sorted(unknown)}; have {names}", file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted]

    print(f"python {platform.python_version()} on {platform.machine()}, {time.strftime('%Y-%m-%d %H:%M')}")
    table = Table()
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        module.run(table, quick=args.quick)
    print()
    print(table.render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
