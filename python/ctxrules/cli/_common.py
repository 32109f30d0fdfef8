"""Helpers shared by the subcommands: JSON output and file reading with clear errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec

from ..errors import CtxrulesError

__all__ = ["print_json", "read_text"]


def print_json(obj: Any) -> None:
    """Write ``obj`` as indented JSON to stdout."""
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(obj), indent=2).decode() + "\n")


def read_text(path: str) -> str:
    """Read a UTF-8 text file (``-`` is stdin); bad bytes and missing files are clear errors."""
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CtxrulesError("no such file", where=path) from None
    except IsADirectoryError:
        raise CtxrulesError("is a directory, not a file", where=path) from None
    except PermissionError:
        raise CtxrulesError("permission denied", where=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CtxrulesError(
            f"not UTF-8 text (bad byte at offset {exc.start})", where=path
        ) from None
