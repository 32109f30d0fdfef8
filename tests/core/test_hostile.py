"""Hostile input never kills the interpreter: the core answers with an error.

Every case runs in a child interpreter (a crash of the core is then a failed test, not a
dead test run) with its address space capped, so a declared length that makes the core
reserve gigabytes fails here even where the machine could give them.  On the build
before the bounded reader, the first two cases (quoted in the hardening issue) aborted
on a 584 GB allocation and overflowed the stack.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import msgspec
import pytest

from ctxrules import _core
from ctxrules.commit import diff_commits
from ctxrules.errors import RenderError, ValidationError
from ctxrules.limits import MAX_NESTING
from ctxrules.model import ContextCommit, ContextItem, ToolUseBlock
from ctxrules.render import render, render_batch, render_context

#: Address space of the child (the interpreter with the core loaded needs ~0.5 GB).
CHILD_MEMORY = 2 << 30

_CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({mem}, {mem}))
from ctxrules import _core
from ctxrules.render import render, render_context
from ctxrules.errors import CtxrulesError
for name, call, arg in json.loads(sys.stdin.read()):
    data = bytes.fromhex(arg)
    fn = {{
        "render": lambda d: render(d, "anthropic"),
        "render_context": lambda d: render_context(d),
        "core_context": lambda d: _core.render_context(d, b""),
        "core_request": lambda d: _core.render_request("gemini", d, b""),
        "core_options": lambda d: _core.render_request("anthropic", b"\\x80", d),
        "core_diff": lambda d: _core.diff_items(d, b"\\x80"),
        "core_batch": lambda d: _core.render_batch([d], [("openai-chat", 0, b"")]),
    }}[call]
    try:
        out = fn(data)
        result = ["ok", repr(out)[:200]]
    except (CtxrulesError, ValueError) as exc:
        result = [type(exc).__name__, str(exc)]
    print(json.dumps([name, *result]), flush=True)
"""


def _run(cases: list[tuple[str, str, bytes]]) -> dict[str, list[str]]:
    """Run ``(name, call, bytes)`` cases in one capped child; their outcomes by name."""
    payload = json.dumps([(n, c, b.hex()) for n, c, b in cases])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD.format(mem=CHILD_MEMORY))],
        input=payload,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    done = {name: rest for name, *rest in lines}
    assert proc.returncode == 0, (
        f"the core killed the interpreter (exit {proc.returncode}) after "
        f"{list(done)[-1:] or 'no case'}: {proc.stderr[-2000:]}"
    )
    assert len(done) == len(cases)
    return done


def _commit(**fields: object) -> bytes:
    return msgspec.msgpack.encode({"id": "c", **fields})


ITEM = {"source_node_id": "u", "role": "user", "rendered": "hi"}


def test_the_quoted_inputs_give_errors_not_crashes():
    out = _run(
        [
            ("huge items count", "render", b"\x81\xa5items\xdd\xff\xff\xff\xff"),
            ("deep arrays", "core_context", b"\x81\xa1x" + b"\x91" * 50000 + b"\xc0"),
        ]
    )
    kind, msg = out["huge items count"]
    assert kind == "RenderError" and "declared length exceeds the data" in msg
    kind, msg = out["deep arrays"]
    assert kind == "ValueError" and f"nested deeper than {_core.MAX_DEPTH}" in msg


def _hostile() -> list[tuple[str, str, bytes]]:
    item_head = b"\x82\xaesource_node_id\xa1u\xa4role\xa4user"
    deep_map = b"\x81\xa1k" * 30000 + b"\xc0"
    cases = [
        ("str32 length", "core_context", b"\x81\xa1x\xdb\xff\xff\xff\xff"),
        ("bin32 length", "core_context", b"\x81\xa1x\xc6\xff\xff\xff\xff"),
        ("ext32 length", "core_context", b"\x81\xa1x\xc9\xff\xff\xff\xff\x01"),
        ("map32 commit", "core_request", b"\xdf\xff\xff\xff\xff"),
        ("map32 field", "core_request", b"\x81\xa1x\xdf\xff\xff\xff\xff"),
        (
            "blocks count",
            "core_request",
            b"\x81\xa5items\x91\x83" + item_head[1:] + b"\xa6blocks\xdd\xff\xff\xff\xff",
        ),
        ("deep maps", "core_request", b"\x81\xa1x" + deep_map),
        (
            "deep in item",
            "core_request",
            b"\x81\xa5items\x91\x83" + item_head[1:] + b"\xa1z" + b"\x91" * 40000 + b"\xc0",
        ),
        (
            "deep in block",
            "core_request",
            b"\x81\xa5items\x91\x83"
            + item_head[1:]
            + b"\xa6blocks\x91\x81\xa5input"
            + b"\x91" * 40000
            + b"\xc0",
        ),
        ("truncated", "core_request", _commit(items=[ITEM])[:-3]),
        ("trailing", "core_request", _commit(items=[ITEM]) + b"\x00"),
        ("bad utf-8", "core_request", _commit(items=[ITEM]).replace(b"hi", b"\xff\xfe")),
        ("bad marker", "core_request", b"\x81\xa1x\xc1"),
        ("negative tokens", "core_request", _commit(items=[{**ITEM, "tokens": -5}])),
        ("deep options", "core_options", b"[" * 100000 + b"]" * 100000),
        (
            "deep schema",
            "core_options",
            b'{"tools":[{"name":"t","input_schema":' + b"[" * 1000 + b"]" * 1000 + b"}]}",
        ),
        ("deep extra", "core_options", b'{"extra":{"a":' + b"{" * 100000 + b"}" * 100001),
        ("bad options", "core_options", b"{"),
        ("extra not object", "core_options", b'{"extra":[1]}'),
        ("diff hostile", "core_diff", b"\x81\xa5items\xdd\xff\xff\xff\xff"),
        ("diff deep", "core_diff", b"\x81\xa1x" + b"\x91" * 50000 + b"\xc0"),
        ("batch hostile", "core_batch", b"\x81\xa5items\xdd\xff\xff\xff\xff"),
        ("context deep", "render_context", b"\x81\xa1x" + deep_map),
    ]
    return cases


def test_hostile_bytes_give_errors_on_every_entry_point():
    cases = _hostile()
    out = _run(cases)
    for name, call, _ in cases:
        kind, msg = out[name]
        if call == "core_batch":
            # A batch reports a bad commit in that job's place.
            assert kind == "ok" and "declared length exceeds" in msg, (name, msg)
        elif call.startswith("render"):
            assert kind == "RenderError", (name, kind, msg)
        else:
            assert kind == "ValueError", (name, kind, msg)


def _nested(levels: int) -> object:
    """A value of ``levels`` nested containers (a dict, then lists)."""
    value: object = 1
    for _ in range(levels - 1):
        value = [value]
    return {"v": value}


def _with_input(levels: int) -> ContextCommit:
    item = ContextItem(
        source_node_id="u",
        role="user",
        rendered="hi",
        blocks=(ToolUseBlock(id="c", name="f", input=_nested(levels)),),  # type: ignore[arg-type]
    )
    return ContextCommit(id="c", session_id="s", head_node_id="h", rules_version="r", items=(item,))


def test_max_depth_accepts_every_value_within_max_nesting():
    # Stored values nest at most MAX_NESTING levels; the commit's structure adds 5.
    assert _core.MAX_DEPTH == MAX_NESTING + 5
    ok = _with_input(MAX_NESTING)
    assert json.loads(render(ok, "anthropic").body)["messages"]
    assert render_context(msgspec.msgpack.encode(ok)).messages
    with pytest.raises(RenderError, match=f"nested deeper than {_core.MAX_DEPTH}"):
        render(_with_input(MAX_NESTING + 1), "anthropic")
    with pytest.raises(RenderError, match="nested deeper"):
        render(msgspec.msgpack.encode(_with_input(MAX_NESTING + 1)), "openai-chat")


def test_options_nesting_bound():
    deep_ok = {"type": "object", "properties": {"x": _nested(MAX_NESTING)}}
    body = json.loads(
        render(
            ContextCommit(id="c", session_id="s", head_node_id="h", rules_version="r"),
            "anthropic",
            tools=[{"name": "t", "input_schema": deep_ok}],
        ).body
    )
    assert body["tools"][0]["name"] == "t"
    too_deep = {"x": _nested(_core.MAX_DEPTH)}
    with pytest.raises(RenderError, match="nested deeper"):
        render(_with_input(1), "gemini", tools=[{"name": "t", "input_schema": too_deep}])


def test_over_deep_tool_arguments_are_sent_as_text():
    # A tool_input nested beyond any stored value is not spliced as JSON (a vendor, or
    # the JSON reader of render_context, would choke on it): it goes out as text.
    deep = "{" + '"a":[' * 5000 + "1" + "]" * 5000 + "}"
    items = (
        ContextItem(source_node_id="u", role="user", rendered="go"),
        ContextItem(source_node_id="a", role="assistant", rendered="calling"),
        ContextItem(
            source_node_id="t",
            role="tool",
            rendered="r",
            name="f",
            caller="a",
            tool_use_id="c1",
            tool_input=deep,
        ),
    )
    commit = ContextCommit(id="c", session_id="s", head_node_id="h", rules_version="r", items=items)
    body = json.loads(render(commit, "anthropic").body)
    assert body["messages"][1]["content"][1]["input"] == {"truncated_args": deep}
    blocks = render_context(commit).messages[1].content
    assert blocks[1].input == {"truncated_args": deep}  # type: ignore[union-attr]


def test_python_wrappers_raise_typed_errors():
    bad = b"\x81\xa5items\x91\x80"  # an item without id or role
    with pytest.raises(RenderError, match=r"items\[0\]"):
        render(bad, "openai-responses")
    with pytest.raises(RenderError):
        render_context(bad)
    [[err]] = render_batch([bad], ["anthropic"], errors="return")
    assert isinstance(err, RenderError) and "items[0]" in str(err)
    with pytest.raises(RenderError, match="provider anthropic"):
        render_batch([bad], ["anthropic"])
    good = ContextCommit(id="a", session_id="s", head_node_id="h", rules_version="r")
    odd = msgspec.structs.replace(good, id="b", items=(1, 2))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"items\[0\]"):
        diff_commits(good, odd)
    with pytest.raises(RenderError, match="could not be encoded"):
        render(msgspec.structs.replace(good, items=(object(),)), "gemini")  # type: ignore[arg-type]
    no_items = msgspec.structs.replace(good, items=None)  # type: ignore[arg-type]
    for call in (lambda: render(no_items, "anthropic"), lambda: render_context(no_items)):
        with pytest.raises(RenderError, match="tuple of ContextItem"):
            call()


def test_core_entry_points_raise_value_error_for_bad_names():
    with pytest.raises(ValueError):
        _core.count_tokens("no-such-encoding", "x")
    with pytest.raises(ValueError):
        _core.count_tokens_batch("no-such-encoding", ["x"])
    with pytest.raises(ValueError):
        _core.encoding_ranks("no-such-encoding")
    with pytest.raises(ValueError):
        _core.render_request("no-such-wire", b"\x80", b"")
    with pytest.raises(ValueError, match="threads"):
        _core.render_batch([], [], 0)
    with pytest.raises(ValueError, match="out of range"):
        _core.render_batch([], [("anthropic", 3, b"")])


def test_tokenizer_wrapper_turns_core_errors_into_tokenizer_errors():
    from ctxrules.errors import TokenizerError
    from ctxrules.tokenizers import RustTokenizer

    tok = RustTokenizer("o200k_base")
    tok.encoding = "no-such-encoding"  # past the constructor's check: the core refuses
    with pytest.raises(TokenizerError, match="unknown encoding"):
        tok.count("x")
    with pytest.raises(TokenizerError, match="unknown encoding"):
        tok.count_batch(["x", "y"])
