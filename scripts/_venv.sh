# Shared by scripts/demo and scripts/bench: make .venv with Python 3.11+ and
# install workingctx into it (editable) with the extras named in $1. The install
# runs only when .venv is missing or pyproject.toml changed since the last one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "workingctx needs Python 3.11 or newer as \$PYTHON or python3; found: $("$python" --version 2>&1)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.workingctx-installed-$1"
want="$(cat pyproject.toml | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$1]"
  echo "$want" > "$stamp"
fi
