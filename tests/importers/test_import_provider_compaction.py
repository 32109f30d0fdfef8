"""Importing an Anthropic conversation keeps a provider compaction block as a block (not
text, not a converted block), and the session renders it back to Anthropic as recorded
(docs/provider-compaction.md)."""

from __future__ import annotations

import json

from ctxrules.commit import make_commit
from ctxrules.importers import import_paths
from ctxrules.model import CompactionBlock
from ctxrules.render import render

COMPACTION = {
    "type": "compaction",
    "content": "Summary: the header is done.",
    "encrypted_content": "Eo8BCkYIBhgC",
    "signature": "c2ln",
    "tool_changes": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "x"}}],
}
BODY = {
    "model": "claude-opus-4-6",
    "system": "Be terse.",
    "messages": [
        {"role": "user", "content": "build the header"},
        {"role": "assistant", "content": [{"type": "text", "text": "header built"}]},
        {"role": "user", "content": "now the footer"},
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": None},  # a failed one: kept, a no-op
                COMPACTION,
                {"type": "text", "text": "footer next"},
            ],
        },
        {"role": "user", "content": "go"},
    ],
}


def test_an_imported_compaction_block_is_kept_and_sent_back(store, tmp_path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(BODY))
    (res,) = import_paths(store, [str(path)])
    assert res.format == "anthropic-messages"
    answer = [n for n in store.nodes(res.id) if n.role == "assistant"][-1]
    assert "converted_blocks" not in answer.metadata
    failed, block, _ = answer.output
    assert isinstance(failed, CompactionBlock) and failed.content is None
    assert isinstance(block, CompactionBlock) and block.signature == "c2ln"
    commit = make_commit(res.id, now=1.0, store=store)
    sent = json.loads(render(commit, "anthropic", "m").body)
    assert sent["messages"][1]["content"][0] == COMPACTION
    assert "build the header" not in json.dumps(sent)
    chat = json.dumps(json.loads(render(commit, "openai-chat", "m").body))
    assert "build the header" in chat and "compaction" not in chat
