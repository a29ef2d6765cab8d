"""
``python -m workingctx``: the ``workingctx`` command (see :mod:`workingctx.cli`).
"""

from workingctx.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
