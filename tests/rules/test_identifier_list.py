"""``rules._text.identifier_list`` (the names a cut or a stub lists) leaves out exactly
the identifiers that ``occurs`` finds in a shown text: a token of word characters is
looked up among the shown text's word runs, any other is searched for; both must give
what searching for every token gave (kept here as the reference)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxrules.rules._text import _KIND_ORDER, identifier_list
from ctxrules.summarizers.facts import exact_identifiers, occurs


def reference(text: str, budget: int, shown: tuple[str, ...]) -> str:
    """``identifier_list`` as it was: ``occurs`` for every token in every shown text."""
    found = [
        (kind, token)
        for kind, token in exact_identifiers(text)
        if "\n" not in token and not any(occurs(token, s) >= 0 for s in shown)
    ]
    found.sort(key=lambda kt: _KIND_ORDER.get(kt[0], 0))
    out: list[str] = []
    size = 0
    for _, token in found:
        extra = len(token) + (2 if out else 0)
        if size + extra <= budget:
            out.append(token)
            size += extra
    return ", ".join(out)


_PIECES = st.sampled_from(
    [
        " ",
        "\n",
        "_",
        "-",
        ".",
        "/",
        "(",
        "12345",
        "123",
        "4567",
        "1,234.5",
        "snake_case",
        "camelCase",
        "HTTPError",
        "os.path",
        "src/app/main.py",
        "--dry-run",
        "run(",
        "2024-01-02",
        "deadbeef01",
        "é",
        "٣٣٣",  # Arabic-Indic digits: word characters to occurs and to \w
        "名前",
        "x²",  # a superscript digit: alphanumeric, not a decimal
        "\u2028",
        "—",
    ]
)
_TEXT = st.lists(_PIECES, max_size=60).map("".join)


@settings(max_examples=600, deadline=None)
@given(_TEXT, st.lists(_TEXT, max_size=3), st.integers(0, 400))
def test_the_list_is_the_one_searching_every_token_gave(text, shown, budget):
    assert identifier_list(text, budget, tuple(shown)) == reference(text, budget, tuple(shown))


def test_a_shown_token_inside_a_longer_word_is_still_listed():
    text = "see handler_id 12345 and src/app/main.py"
    # Only inside longer words / numbers in the shown text: not shown as tokens.
    shown = ("my_handler_id_2 and 123456 and xsrc/app/main.pyc",)
    assert identifier_list(text, 200, shown) == reference(text, 200, shown)
    assert "handler_id" in identifier_list(text, 200, shown)
    assert "12345" in identifier_list(text, 200, shown)
    shown = ("(handler_id) 12345.",)
    assert "handler_id" not in identifier_list(text, 200, shown)
    assert "12345" not in identifier_list(text, 200, shown)
