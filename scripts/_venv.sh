# Shared by scripts/demo and scripts/test: make .venv with Python 3.11+ and
# install workingctx into it with the extras named in $1.
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
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$1]"
