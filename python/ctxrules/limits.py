"""Limits on what ctxrules accepts: the same bounds on the way in as on the way out.

History is append-only, so anything stored must stay readable by every later layer
(commit, render in Rust, the CLI).  Writers check these bounds before storing; readers
refuse anything beyond them with a typed error instead of exhausting the stack or the
memory.
"""

from __future__ import annotations

__all__ = ["MAX_NESTING"]

#: Deepest nesting of lists and maps accepted in any stored value (node input, output,
#: metadata) and in any rendered one (tool schemas).  Real transcripts and request
#: bodies nest a few tens of levels; serde_json, which reads tool schemas in the Rust
#: core, stops at 128.
MAX_NESTING = 100
