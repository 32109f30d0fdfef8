"""``exact_identifiers`` finds what the regular expression it replaced found.

The scan moved to the Rust core (rust/identifiers.rs) because the expression cost
milliseconds per kilobyte on the engine's hot path (aged tool results).  The expression
and its filters are kept here, as they were, as the reference; the core must give the
same ``(kind, token)`` list on every text of the corpus and on generated text made of
the characters the alternatives turn on (non-ASCII letters, digits and spaces included:
Python's Unicode classes reach the core through the class string).
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.corpus import CORPUS, manifest

from ctxrules.summarizers import facts
from ctxrules.summarizers.facts import (
    MAX_ERRORS_PER_RESULT,
    error_lines,
    exact_identifiers,
    exact_identifiers_batch,
)

_REFERENCE = re.compile(
    "|".join((facts._URL, facts._UUID, facts._PATH, facts._FILE, facts._DATE, facts._HASH))
    + r"|(?P<flag>(?<![\w-])--[A-Za-z][\w-]*[A-Za-z0-9])"
    + r"|(?P<dotted>(?<![\w.$@/-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"
    + r"|(?P<symbol>(?<![\w$@-])(?=\w*[A-Za-z])(?=\w*(?:_|[a-z][A-Z]|[A-Z]{2}[a-z]))"
    r"\w{3,}(?![\w-]))"
    + r"|(?P<call>(?<![\w.$@-])[A-Za-z]\w{2,}\()"
    + "|"
    + facts._ID
    + r"|(?P<number>(?<![\w.,-])\d+(?:[.,]\d+)*(?![\w]))"
)
_PLURAL_ACRONYM = re.compile(r"[A-Z]+s")
_TRAILING = ".,;:!?)]}'\""


def _symbol_part(part: str) -> bool:
    return len(part) >= 3 and bool(
        "_" in part.strip("_") or re.search(r"[a-z][A-Z]|[A-Z]{2}[a-z]", part)
    )


def reference_error_lines(text: str) -> list[str]:
    """``error_lines`` as it was (before it skipped texts without an error word)."""
    out: list[str] = []
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if len(out) >= MAX_ERRORS_PER_RESULT:
            break
        fact = facts._cap(facts.normalize(line))
        if len(line) >= 8 and facts._ERROR_LINE.match(line) and fact not in out:
            out.append(fact)
    return out


def reference(text: str) -> list[tuple[str, str]]:
    """``exact_identifiers`` as it was written with the expression."""
    out: dict[str, str] = {}
    for m in _REFERENCE.finditer(text):
        kind = m.lastgroup or ""
        token = m.group()
        if kind in ("url", "path"):
            token = token.rstrip(_TRAILING)
            if kind == "path" and token.count("/") == 1 and not token.startswith(("/", "~", ".")):
                if "." not in token.rsplit("/", 1)[1]:
                    continue
        elif kind == "dotted":
            parts = token.split(".")
            if all(len(p) < 2 for p in parts):
                continue
            out.setdefault(token, "symbol")
            for part in parts:
                if _symbol_part(part):
                    out.setdefault(part, "symbol")
            continue
        elif kind == "symbol":
            if _PLURAL_ACRONYM.fullmatch(token) or not token.strip("_"):
                continue
        elif kind == "id" and len(token) < 4:
            continue
        elif kind == "number" and sum(c.isdigit() for c in token) < 3:
            continue
        out.setdefault(token, kind)
    for line in reference_error_lines(text):
        out.setdefault(line, "error")
    return [(kind, token) for token, kind in out.items()]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _corpus_texts() -> list[str]:
    """Every string of the corpus's JSON and JSON Lines files longer than 20
    characters, each once (tool outputs, messages, arguments as agents saw them), and
    the other files' text whole."""
    seen: set[str] = set()
    for entry in manifest():
        raw = (CORPUS / entry["path"]).read_text(encoding="utf-8", errors="surrogateescape")
        try:
            values = _strings(json.loads(raw))
        except ValueError:
            values = []
            for line in raw.splitlines():
                try:
                    values += _strings(json.loads(line))
                except ValueError:
                    values.append(line)
        seen.update(v for v in values if len(v) > 20)
    return sorted(seen)


def test_the_corpus_gives_what_the_expression_gave():
    texts = _corpus_texts()
    assert sum(map(len, texts)) > 5_000_000  # the whole corpus, not a corner of it
    got = exact_identifiers_batch(texts)
    differ = [t[:80] for t, ids in zip(texts, got) if ids != reference(t)]
    assert not differ, f"{len(differ)} of {len(texts)} texts differ, e.g. {differ[:3]}"


_PIECES = st.sampled_from(
    [
        *"aZx_0917-./~@+:( \n\t,;$)]'\"Tsefpyh",
        "é",  # a letter: \w, not \d
        "٣",  # an Arabic-Indic digit: \d
        "²",  # a digit that is not decimal: \w, not \d
        "\u00a0",  # a no-break space: \s
        "€",
        "\udc80",  # a lone surrogate
        "https://",
        ".py",
        ".json",
        "--",
        "2024-01-02",
        " 12:30",
        ":45",
        "abc123f",
        "deadbeef0",
        "12345678-1234-abcd-ABCD-1234567890ab",
        "HTTPError",
        "camelCase",
        "snake_case",
        "os.path",
        "URLs",
        "run(",
        "1,234.5",
        "ValueError: bad\n",
        "Traceback (most recent call last):\n",
        "E   assert\n",
        "FAILED ",
        "error[E0308]: ",
        "fatal: ",
        "panicked ",
        "Warning",
        "\r\n",
        "\x1c",
        "\u2028",
    ]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_generated_text_gives_what_the_expression_gave(text):
    assert exact_identifiers(text) == reference(text)


def test_error_lines_without_an_error_word_are_none():
    assert error_lines("def f(x):\n    return x\n") == []
    assert error_lines("ok\nValueError: bad input\n") == ["ValueError: bad input"]
    assert error_lines("all good here", failed=True) == ["all good here"]


def test_a_batch_is_each_text_alone():
    texts = ["see src/a.py and HTTPError", "", "é٣٣٣ 2024-01-02T10:00", "--dry-run x.y.z"]
    assert exact_identifiers_batch(texts) == [exact_identifiers(t) for t in texts]
    assert exact_identifiers_batch(texts) == [reference(t) for t in texts]


def _class_of(ch: str) -> str:
    """The class string's character for ``ch``, by its definition: ASCII as it is, else
    its class under ``re`` (a digit, another word character, a space, anything else)."""
    if ord(ch) < 0x80:
        return ch
    if re.fullmatch(r"\d", ch):
        return "\x81"
    if re.fullmatch(r"\w", ch):
        return "\x80"
    if re.fullmatch(r"\s", ch):
        return "\x82"
    return "\x83"


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES | st.text(max_size=30), max_size=400).map("".join))
def test_the_class_string_maps_every_character_however_long_the_text(text):
    # Up to ~10 KB: runs far apart, close together and across the encoder's lookahead.
    assert facts._class_string(text) == "".join(map(_class_of, text)).encode("latin-1")


def test_long_text_with_sparse_and_dense_non_ascii_gives_what_the_expression_gave():
    sparse = ("src/app/main.py: run(x) -> ok\n" * 40 + "— HTTPError é2024-01-02\n") * 8
    dense = "名前 é٣٣٣ fooBar_baz — 2024-01-02 " * 300
    for text in (sparse, dense, sparse + dense + sparse):
        assert exact_identifiers(text) == reference(text)
        assert facts._class_string(text) == "".join(map(_class_of, text)).encode("latin-1")
