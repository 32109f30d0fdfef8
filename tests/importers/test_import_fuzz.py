"""Fuzzing the importers with mutated corpus files (set CTXRULES_FUZZ_EXAMPLES for a
longer run): only ctxrules' typed errors may escape, a failed import leaves the store
exactly as it was, and a session that imports can be committed and rendered.

Besides odd values, a mutation may plant what reaches Python's own limits: a value
nested far deeper than ``limits.MAX_NESTING``, an integer of 5,000 digits, a float
that overflows, ``NaN``, a YAML alias."""

from __future__ import annotations

import json
import os

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxrules.commit import make_commit
from ctxrules.errors import CtxrulesError
from ctxrules.importers import import_paths
from ctxrules.limits import check_metadata, check_node
from ctxrules.render import render, session_defaults
from ctxrules.situation import commit_situation
from ctxrules.store import open_store

SMALL = {
    "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": "claude-code",
    "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": "claude-code",
    "claude-code-jsonl/reliability_coverage-test-fix.jsonl": "claude-code",
    "swe-agent-traj/function_calling_replace_marshmallow-code__marshmallow-1867.traj": "swe-agent",
    "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj": "swe-agent",
    "openhands-trajectory/basic_gui_mode.json": "openhands",
    "vcr-cassettes-yaml/anthropic/test_multiple_parallel_tool_calls.yaml": "cassette",
    "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml": "cassette",
    "vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml": "cassette",
    "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml": "cassette",
    "openai-chat-json/taubench_gpt-4o-airline.json": "openai-chat",
}
BASE = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
ODD_VALUES = [
    None,
    0,
    -1,
    "",
    "x",
    [],
    {},
    True,
    [None],
    {"type": "tool_result"},
    {"role": "tool"},
    {"type": 5},
    1e308,
]
HOSTILE = [f"__HOSTILE_{kind}__" for kind in ("DEEP", "WIDE_DEEP", "INT", "INF", "NAN", "ALIAS")]
PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def plant(kind: str, raw: str) -> str:
    """Replace the hostile markers a mutation left in the dumped text."""
    deep = {"DEEP": 1000, "WIDE_DEEP": 150}
    for name in ("DEEP", "WIDE_DEEP", "INT", "INF", "NAN", "ALIAS"):
        marker = f"__HOSTILE_{name}__"
        if marker not in raw:
            continue
        if name in deep:
            value = '{"k": ' * deep[name] + "1" + "}" * deep[name]
        elif name == "INT":
            value = "7" * 5000
        elif name == "INF":
            value = "1e999"
        elif name == "NAN":
            value = ".nan" if kind == "yaml" else "NaN"
        else:
            value = "*planted" if kind == "yaml" else "null"
            if kind == "yaml":
                raw = "planted_anchor: &planted [1, 2]\n" + raw
        raw = raw.replace(f'"{marker}"', value).replace(f"'{marker}'", value)
        raw = raw.replace(marker, value)
    return raw


def load(corpus, name):
    text = (corpus / name).read_text()
    if name.endswith(".jsonl"):
        return "jsonl", [json.loads(x) for x in text.splitlines() if x.strip()]
    if name.endswith(".yaml"):
        return "yaml", yaml.safe_load(text)
    doc = json.loads(text)
    if name.startswith("openai-chat-json"):
        doc = doc[:3]  # three runs keep each example fast
    return "json", doc


def dump(kind, doc):
    if kind == "jsonl":
        return "\n".join(json.dumps(x) for x in doc) + "\n"
    if kind == "yaml":
        return yaml.safe_dump(doc)
    return json.dumps(doc)


def mutate_tree(data, doc, values=ODD_VALUES):
    """Replace, delete or retype one value somewhere in the document."""
    node, parent, key = doc, None, None
    for _ in range(data.draw(st.integers(0, 6))):
        if isinstance(node, dict) and node:
            parent, key = node, data.draw(st.sampled_from(sorted(node)))
        elif isinstance(node, list) and node:
            parent, key = node, data.draw(st.integers(0, len(node) - 1))
        else:
            break
        node = parent[key]
    if parent is None:
        return
    action = data.draw(st.sampled_from(["replace", "delete", "duplicate"]))
    if action == "delete":
        del parent[key]
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key])))
    else:
        parent[key] = json.loads(json.dumps(data.draw(st.sampled_from(values))))


def mutate_bytes(data, text):
    raw = text.encode()
    kind = data.draw(st.sampled_from(["cut", "insert", "drop", "swap-lines"]))
    at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    if kind == "cut":
        return raw[:at]
    if kind == "insert":
        return raw[:at] + data.draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if kind == "drop":
        return raw[:at] + raw[at + data.draw(st.integers(1, 64)) :]
    lines = raw.split(b"\n")
    i, j = (data.draw(st.integers(0, len(lines) - 1)) for _ in range(2))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


@settings(
    max_examples=int(os.environ.get("CTXRULES_FUZZ_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_files_fail_only_with_typed_errors(corpus, tmp_path_factory, snapshot, data):
    name = data.draw(st.sampled_from(sorted(SMALL)))
    kind, doc = load(corpus, name)
    how = data.draw(st.sampled_from(["tree", "hostile", "bytes"]))
    if how == "bytes":
        raw = mutate_bytes(data, dump(kind, doc))
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            mutate_tree(data, doc, HOSTILE if how == "hostile" else ODD_VALUES)
        raw = plant(kind, dump(kind, doc)).encode()
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / name.rsplit("/", 1)[-1]
    path.write_bytes(raw)
    store = open_store(folder / "store")
    try:
        # A store that already holds a session: a failure must leave it as it was.
        import_paths(store, [str(corpus / BASE)])
        before = snapshot(store)
        fmt = data.draw(st.sampled_from(["auto", SMALL[name]]))
        try:
            results = import_paths(store, [str(path)], format=fmt)
        except CtxrulesError:
            assert snapshot(store) == before
        else:
            for s in store.list_sessions():
                for n in store.nodes(s.id):
                    assert not (n.predecessor and n.caller)
                    check_node(n)  # within every bound a later read relies on
                check_metadata(s.metadata, where=s.id)
            # What was stored stays usable: it commits, and renders or says why not.
            provider = data.draw(st.sampled_from(PROVIDERS))
            for r in results[:3]:
                info = store.get_session(r.id)
                if info.head is None:
                    continue
                commit = make_commit(r.id, store=store, now=0)
                try:
                    situation = commit_situation(store, commit)
                    defaults = session_defaults(info.metadata, provider).options
                    render(commit, provider, situation=situation, **defaults)
                except CtxrulesError:
                    pass
    finally:
        store.close()
