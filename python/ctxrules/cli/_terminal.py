"""What the commands print for people, made safe for a terminal.

Stored data — transcripts, titles, tool names, file names — is text someone else
wrote, and a terminal obeys control characters in what it prints: ESC starts
sequences that set the window title (OSC 0), clear the screen, write hyperlinks
(OSC 8) or remap keys; a carriage return or backspaces overwrite what was printed;
bidirectional overrides reorder it.  ``printable`` writes every such character as a
visible escape (``\\x1b``, ``\\r``, ``\\u202e``), as git quotes control characters
in the paths it prints: C0 controls but newline and tab, DEL, the C1 range (U+0080 to
U+009F, where U+009B is a CSI on some terminals) and the bidirectional controls.

``echo`` prints a human-readable line through it.  ``rich_console()`` is the rich console
of the commands' tables: every string it renders goes through ``printable`` first
(our own styling is added by rich afterwards, so colours still work), and neither
console markup (``[link=…]``) nor emoji codes in data are interpreted.  JSON output
(``--json``, a rendered request body) is data for programs, written as it is.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

__all__ = ["echo", "printable", "rich_console"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\b": "\\b", "\x0b": "\\v", "\x0c": "\\f", "\x00": "\\0"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character written as a visible escape (see the
    module docstring); newlines and tabs stay."""
    return _CONTROL.sub(_escape, str(text))


def echo(*parts: object, sep: str = " ", file: IO[str] | None = None) -> None:
    """``print`` for people: the line through ``printable``."""
    print(printable(sep.join(str(p) for p in parts)), file=file or sys.stdout)


def rich_console(**kwargs: Any) -> Any:
    """A rich ``Console`` (``kwargs`` as rich takes them) that escapes every string it
    renders and reads no markup or emoji codes unless a call asks for markup."""
    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
    from rich.console import Console

    class _Escaping(Console):
        def render_str(self, text: str, **options: Any) -> Any:
            return super().render_str(printable(text), **options)

    kwargs.setdefault("markup", False)
    kwargs.setdefault("emoji", False)
    return _Escaping(**kwargs)
