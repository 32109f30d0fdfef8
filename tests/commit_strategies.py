"""Hypothesis strategies of commits: items of every role, state and kind of block, with
text that holds every character JSON must escape (lone surrogates are not UTF-8 and
have their own tests), and few ids, so calls, callers and repeats collide.  Shared by
the tests that render any commit (``tests/core/test_fuzz.py``) and estimate it
(``tests/providers/test_estimate_core.py``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ctxrules.model import (
    CompactionBlock,
    ContextItem,
    ImageBlock,
    ImageSource,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

ids = st.sampled_from(["a1", "a2", "u1", "t1", "c1", "c1_2", 'q"x'])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
#: Tool arguments: an object, an empty one, or text a rule cut.
tool_inputs = st.one_of(text, st.just('{"path": "."}'), st.just("{}"))


def blocks(
    *, image_data: st.SearchStrategy[str] = text, media_type: st.SearchStrategy[str] = text
) -> st.SearchStrategy[tuple[Any, ...]]:
    """Up to three content blocks of any kind (images' data from ``image_data``)."""
    return st.lists(
        st.one_of(
            st.builds(TextBlock, text=text),
            st.builds(
                ThinkingBlock,
                thinking=text,
                signature=text,
                vendor=st.sampled_from(["", "gemini"]),
            ),
            st.builds(RedactedThinkingBlock, data=text),
            st.builds(
                ImageBlock,
                source=st.builds(
                    ImageSource,
                    type=st.sampled_from(["base64", "url"]),
                    media_type=media_type,
                    data=image_data,
                    url=image_data,
                ),
            ),
            st.builds(
                CompactionBlock,
                content=st.none() | text,
                encrypted_content=st.none() | text,
                signature=st.none() | text,
                tool_changes=st.none() | st.lists(st.dictionaries(text, text, max_size=2)),
                id=ids,
                vendor=st.sampled_from(["", "openai", "gemini"]),
            ),
            st.builds(
                ToolUseBlock,
                id=ids,
                name=text,
                input=st.dictionaries(text, st.integers(-(2**63), 2**63 - 1), max_size=2),
            ),
        ),
        max_size=3,
    ).map(tuple)


def items(
    *,
    tool_input: st.SearchStrategy[str] = tool_inputs,
    content: st.SearchStrategy[tuple[Any, ...]] | None = None,
) -> st.SearchStrategy[ContextItem]:
    """A commit item of any role and state (``tool_input`` and block ``content`` drawn
    from the strategies given)."""
    return st.builds(
        ContextItem,
        source_node_id=ids,
        role=st.sampled_from(["user", "assistant", "tool", "system"]),
        state=st.sampled_from(["full", "aged", "cleared", "summarized", "summary"]),
        rendered=text,
        tokens=st.integers(0, 2**40),
        name=text,
        caller=st.none() | ids,
        tool_use_id=st.none() | ids,
        tool_input=tool_input,
        is_error=st.booleans(),
        attached_from=st.none() | st.just("cc_x"),
        blocks=blocks() if content is None else content,
    )
