"""Limits on what ctxrules accepts: the same bounds on the way in as on the way out.

History is append-only, so anything stored must stay readable by every later layer
(commit, render in Rust, the CLI).  Writers check these bounds before storing; readers
refuse anything beyond them with a typed error instead of exhausting the stack or the
memory.

``check_node(call)`` is the one write check of a node, called by every store before a
node is written (the DAG API and the importers alike); ``check_metadata(value)`` is the
same check for a session's metadata.  Importers also bound what one file may store
(``import_budget``).
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from .errors import ValidationError
from .model import Node

__all__ = [
    "IMPORT_EXPANSION",
    "IMPORT_SLACK_BYTES",
    "MAX_EPOCH",
    "MAX_NESTING",
    "MAX_NODE_BYTES",
    "MAX_USAGE_TOKENS",
    "MIN_EPOCH",
    "check_metadata",
    "check_node",
    "check_now",
    "import_budget",
    "nesting_path",
]

#: Deepest nesting of lists and maps accepted in any stored value (node input, output,
#: metadata) and in any rendered one (tool schemas).  Real transcripts and request
#: bodies nest a few tens of levels; serde_json, which reads tool schemas in the Rust
#: core, stops at 128.
MAX_NESTING = 100

#: Largest encoded (JSON) body of one node, and of one session's metadata.  Twice the
#: largest request body a provider accepts (Anthropic: 32 MB), so any node can still be
#: sent whole, and far below SQLite's 1 GB limit on one value, so the commit holding a
#: node's text can be stored too.
MAX_NODE_BYTES = 64 * 1024 * 1024

#: Largest token count a vendor's usage may report for one request (any of its fields):
#: fifty times the largest context window on sale (2M tokens), so no real answer is
#: refused, while a count that could only be a bug (10^30, which ``stats`` would then
#: show as the window's use) is.
MAX_USAGE_TOKENS = 100_000_000

#: What one import may store: at most ``IMPORT_EXPANSION`` bytes of nodes and session
#: metadata per byte of the file, plus ``IMPORT_SLACK_BYTES``.  Importers copy little
#: (a tool call's arguments into its result's node, a converted block's original into
#: metadata): the corpus files store 0.1-1.1 bytes per byte of file (1.3 with
#: ``cassette-all``).  Far more means the file repeats content by reference (YAML
#: aliases, one tool call answered a thousand times).
IMPORT_EXPANSION = 8
IMPORT_SLACK_BYTES = 1024 * 1024

# The fixed levels of a node's ``output`` that the limit does not count: the block list
# and the block itself; what nests below them (a tool_use's ``input``) is the free value.
_OUTPUT_FRAME = 2


# What a write checks: a body decodes back into a Node.  ``input`` and ``metadata`` are
# free JSON (any value reads back), and decoding them is most of the cost, so the check
# decodes a struct derived from Node without them (derived, so it cannot drift); a text
# ``output`` needs no check either, and decoding it would copy the node's largest part.
#: The times ``check_now`` accepts, in seconds since the epoch: 0001-01-01T00:00:00Z to
#: 9999-12-31T23:59:59Z, the years an ISO 8601 date can name.
MIN_EPOCH = -62_135_596_800.0
MAX_EPOCH = 253_402_300_799.0


def check_now(now: object, *, where: str = "now") -> float:
    """``now`` as a float, or ``ValidationError`` unless it is a finite number of seconds
    since the epoch within years 1 to 9999 (``bool`` is refused).

    Reproducible commits need the caller's clock: the library never reads the wall clock,
    and a non-finite time would be stored as NULL by SQL or hash unequal to itself.
    """
    if (
        isinstance(now, bool)
        or not isinstance(now, (int, float))
        or not math.isfinite(now)
        or not MIN_EPOCH <= now <= MAX_EPOCH
    ):
        raise ValidationError(
            "now must be a finite number of seconds since the epoch (years 1 to 9999), "
            f"got {now!r}",
            where=where,
            hint="pass now=time.time() for the current time",
        )
    return float(now)


def _checked(without: tuple[str, ...]) -> msgspec.json.Decoder[Any]:
    fields = [
        (f.name, f.type) if f.required else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(Node)
        if f.name not in without
    ]
    return msgspec.json.Decoder(msgspec.defstruct("_Checked", fields))


_checked_decoder = _checked(("input", "metadata"))
_checked_text_decoder = _checked(("input", "metadata", "output"))
_encoder = msgspec.json.Encoder()

_STRING = re.compile(rb'"[^"]*"')
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _nests_deeper(encoded: bytes, limit: int) -> bool:
    """Whether JSON text as msgspec writes it nests more than ``limit`` lists/maps.

    Linear and in C: without strings and scalars the text is a bracket sequence, and
    each pass of ``replace("[]", "")`` removes exactly one level everywhere.
    """
    if encoded.count(b"[") + encoded.count(b"{") <= limit:
        return False
    if b"\\" in encoded:  # escaped backslashes first, then escaped quotes
        encoded = encoded.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _STRING.sub(b"", encoded).translate(_AS_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


def _children(value: Any) -> list[tuple[str, Any]] | None:
    if isinstance(value, dict):
        return [(f".{k}" if isinstance(k, str) else f"[{k!r}]", v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, msgspec.Struct):
        return [(f".{f}", getattr(value, f)) for f in value.__struct_fields__]
    return None


def nesting_path(value: Any, limit: int = MAX_NESTING) -> str | None:
    """Where ``value`` first nests more than ``limit`` lists/maps (``.a[0].b…``).

    ``None`` if it does not.  Structs count as maps, as in their JSON.  Iterative, so a
    value of any depth Python can build is measured without exhausting the stack.
    """
    # Each entry's path is a (step, parent path) chain: O(1) per element visited.
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        item, depth, path = stack.pop()
        kids = _children(item)
        if kids is None:
            continue
        if depth + 1 > limit:
            steps: list[str] = []
            while path is not None:
                steps.append(path[0])
                path = path[1]
            return _short(steps[::-1])
        stack.extend((child, depth + 1, (step, path)) for step, child in reversed(kids))
    return None


def _short(steps: list[str]) -> str:
    if len(steps) <= 8:
        return "".join(steps)
    return "".join(steps[:6]) + f"…({len(steps)} steps)"


def _depth_error(what: str, where: str, path: str | None) -> ValidationError:
    spot = f" (at {what}{path})" if path else ""
    return ValidationError(
        f"{what} nests more than {MAX_NESTING} levels of lists/maps{spot}; "
        f"ctxrules stores at most {MAX_NESTING} (limits.MAX_NESTING)",
        where=where,
        hint="flatten the value, or store it as a JSON string",
    )


def _size_error(what: str, where: str, size: int) -> ValidationError:
    return ValidationError(
        f"{what} is {size / 2**20:.1f} MiB encoded; ctxrules stores at most "
        f"{MAX_NODE_BYTES // 2**20} MiB per node (limits.MAX_NODE_BYTES)",
        where=where,
        hint="split the content over several nodes or store a reference to it",
    )


def _encode(value: Any) -> bytes | None:
    """JSON of a value, or ``None`` when it nests too deep for the encoder's recursion."""
    try:
        return _encoder.encode(value)
    except RecursionError:
        return None


def check_node(call: Node) -> bytes:
    """Validate a node before it is stored; returns its JSON body.

    Refused with ``ValidationError`` (naming the node and the field): a body that would
    not decode back into a ``Node`` (``Node(...)`` does not type-check its fields), a
    non-finite ``created_at``, a free value (``input``, ``metadata``, a tool_use's
    ``input`` in ``output``) nesting more than ``MAX_NESTING`` lists/maps, a body over
    ``MAX_NODE_BYTES``.  A stored node can never be fixed or deleted, so whatever a
    later read needs is checked here.  A plain function of the node: every store calls it.
    """
    where = f"node {call.id!r}" + (f" of session {call.session_id}" if call.session_id else "")
    if not isinstance(call.metadata, dict):
        raise _unstorable(
            where, TypeError(f"metadata must be a dict, got {type(call.metadata).__name__}")
        )
    if not isinstance(call.created_at, (int, float)) or not math.isfinite(call.created_at):
        raise ValidationError(
            f"created_at must be a finite number of epoch seconds, got {call.created_at!r}",
            where=where,
            hint="give the time the call was made, or 0.0 when it is unknown",
        )
    body = _encode_checked(call, where)
    if len(body) > MAX_NODE_BYTES:
        raise _size_error("the node", where, len(body))
    try:
        (_checked_text_decoder if isinstance(call.output, str) else _checked_decoder).decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _unstorable(where, exc) from None
    return body


def _unstorable(where: str, exc: Exception) -> ValidationError:
    return ValidationError(
        f"the node cannot be stored: {exc}",
        where=where,
        hint="content is text or a list of content blocks; input and metadata are JSON",
    )


def _encode_checked(call: Node, where: str) -> bytes:
    # The whole body within MAX_NESTING + 1 (the Node object itself) means every field
    # is within its limit; only a deeper body needs the field-by-field look.
    try:
        body = _encode(call)
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as exc:
        raise _unstorable(where, exc) from None
    if body is not None and not _nests_deeper(body, MAX_NESTING + 1):
        return body
    for field, frame in (("input", 0), ("output", _OUTPUT_FRAME), ("metadata", 0)):
        value = getattr(call, field)
        encoded = _encode(value)
        if encoded is None or _nests_deeper(encoded, MAX_NESTING + frame):
            raise _depth_error(field, where, nesting_path(value, MAX_NESTING + frame))
    assert body is not None  # every field is shallow enough to encode
    return body


def check_metadata(value: Any, *, where: str) -> bytes:
    """Validate a session's metadata before it is stored; returns its JSON.

    A dict of JSON values, nesting at most ``MAX_NESTING`` levels, at most
    ``MAX_NODE_BYTES`` encoded; ``ValidationError`` naming ``where`` otherwise.
    """
    if not isinstance(value, dict):
        raise ValidationError(
            f"session metadata must be a dict, got {type(value).__name__}", where=where
        )
    try:
        encoded = _encode(value)
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(
            f"session metadata cannot be stored: {exc}", where=where, hint="use JSON values"
        ) from None
    if encoded is None or _nests_deeper(encoded, MAX_NESTING):
        raise _depth_error("metadata", where, nesting_path(value))
    if len(encoded) > MAX_NODE_BYTES:
        raise _size_error("the session metadata", where, len(encoded))
    return encoded


def import_budget(file_bytes: int) -> int:
    """How many bytes (nodes and session metadata, encoded) an import of a file may store."""
    return IMPORT_EXPANSION * file_bytes + IMPORT_SLACK_BYTES
