"""
Loading tiktoken encodings: by name (an offline copy first, a download given
up after a timeout) or from a ``.tiktoken`` rank file.

The functions take the ``tiktoken`` module as an argument: it is an optional
extra, imported only when a :class:`~workingctx.tokens.TiktokenCounter` is
built. Loaded encodings are kept for the life of the process, and a name that
failed to load is not tried again.
"""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

from workingctx.exceptions import ArgumentValueError

__all__ = ["OFFLINE_SUFFIX", "load_file", "load_named"]

_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
    r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_PATTERNS = {
    "cl100k_base": _CL100K_PATTERN,
    "o200k_base": _O200K_PATTERN,
    "p50k_base": _R50K_PATTERN,
    "r50k_base": _R50K_PATTERN,
}
OFFLINE_SUFFIX = "_offline"
_DOWNLOAD_TIMEOUT_S = 10.0
"""How long a download of an encoding may take before the counter gives up on it."""

_ENCODINGS: dict[str, Any] = {}
_FAILURES: dict[str, str] = {}
_LOAD_LOCK = threading.Lock()


def _get_with_timeout(tiktoken_module: Any, name: str) -> Any:
    """
    ``tiktoken.get_encoding(name)`` in a daemon thread, abandoned after a timeout.

    tiktoken downloads encodings without a timeout; on a machine whose network
    drops packets that would hang the caller.
    """
    box: dict[str, Any] = {}

    def load() -> None:
        try:
            box["encoding"] = tiktoken_module.get_encoding(name)
        except BaseException as exc:  # noqa: BLE001  # reported to the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=load, name=f"workingctx-tiktoken-{name}", daemon=True)
    thread.start()
    thread.join(_DOWNLOAD_TIMEOUT_S)
    if "encoding" in box:
        return box["encoding"]
    if "error" in box:
        raise box["error"]
    msg = f"loading the tiktoken encoding {name!r} took longer than {_DOWNLOAD_TIMEOUT_S:g} s (no network?)"
    raise TimeoutError(msg)


def load_named(tiktoken_module: Any, name: str) -> Any:
    """
    The encoding called *name*: an offline copy first when one is installed, then tiktoken's own.
    """
    with _LOAD_LOCK:
        if name in _ENCODINGS:
            return _ENCODINGS[name]
        if name in _FAILURES:
            raise LookupError(_FAILURES[name])
        names = set(tiktoken_module.list_encoding_names())
        candidates = [name]
        if not name.endswith(OFFLINE_SUFFIX) and name + OFFLINE_SUFFIX in names:
            candidates.insert(0, name + OFFLINE_SUFFIX)
        problems: list[str] = []
        for candidate in candidates:
            try:
                encoding = _get_with_timeout(tiktoken_module, candidate)
            except Exception as exc:  # noqa: BLE001  # any failure means: try the next, then fall back
                problems.append(f"{candidate}: {type(exc).__name__}: {exc}")
                continue
            _ENCODINGS[name] = encoding
            return encoding
        if name not in names:
            problems.append(f"known encodings are {sorted(names)}")
        _FAILURES[name] = "; ".join(problems)
        raise LookupError(_FAILURES[name])


def load_file(tiktoken_module: Any, path: Path, pat_str: str | None) -> Any:
    """
    An encoding built from a ``.tiktoken`` rank file (base64 token, space, rank, per line).
    """
    key = f"file:{path.resolve()}:{pat_str}"
    with _LOAD_LOCK:
        if key in _ENCODINGS:
            return _ENCODINGS[key]
        ranks: dict[bytes, int] = {}
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    token, rank = line.split()
                    ranks[base64.b64decode(token)] = int(rank)
                except ValueError as exc:
                    msg = f"line {number} of {str(path)!r} is not '<base64 token> <rank>': {line[:80]!r}"
                    raise ArgumentValueError(msg, argument="encoding", value=path) from exc
        stem = path.name.removesuffix(".tiktoken")
        pattern = pat_str or _PATTERNS.get(stem.removesuffix(OFFLINE_SUFFIX), _CL100K_PATTERN)
        encoding = tiktoken_module.Encoding(stem, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        _ENCODINGS[key] = encoding
        return encoding
