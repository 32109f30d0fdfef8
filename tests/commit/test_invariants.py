"""Invariants 1-8 (docs/rules.md) and every rule's promise as hypothesis property tests,
for the built-in rules in every shipped configuration (the kit's generated sessions:
tool calls, protected tools, huge and failing results, branches, attach pointers,
merges, locked / pinned / cited nodes, system nodes, lines before the task, compaction
boundaries)."""

from __future__ import annotations

from hypothesis import given, settings

from ctxrules.testing import Script, check_rule, drive, pipelines_with, scripts


def test_builtin_rules_keep_the_invariants_in_every_shipped_configuration():
    check_rule(None, examples=15)


@settings(max_examples=30, deadline=None, database=None)
@given(scripts(10))
def test_generated_sessions_cover_branches_attach_merges_and_locks(script: Script):
    # The property above is only as good as its sessions: make sure the generator's
    # features reach the commits (each example, one pipeline).
    runs = drive(script, pipelines_with(None)[0])
    assert len(runs) == len(script.steps)
    seen: set[str] = set()
    for step, (parent, gen, nodes) in zip(script.steps, runs):
        if step.attach_back and parent is not None:
            # expanded now, or already earlier on this branch (expanded once: invariant 6)
            # (an unavailable source's item keeps its text when a compaction folds it)
            assert any(
                it.attached_from
                or it.reason == "attach_unavailable"
                or it.rendered.endswith("could not be loaded]")
                for it in gen.commit.items
            )
        if step.merge_back and parent is not None:
            # a merge names its peers after its own parent (invariant 7's allowed case)
            merge = next(n for n in nodes.values() if n.id not in seen and "merge" in n.metadata)
            peers = [p["commit"] for p in merge.metadata["merge"]["peers"]]
            assert gen.commit.parent_ids == (parent.id, *[p for p in peers if p != parent.id])
        seen.update(nodes)
        if step.locked:
            assert any(it.locked for it in gen.commit.items)
        if step.system:  # system nodes reach the commit, locked
            assert any(it.role == "system" and it.locked for it in gen.commit.items)
        if step.kind != "task" and not step.pinned and not step.compact:
            # a line that is not the task never becomes the anchor (it opens the turn)
            items = gen.commit.items
            at = gen.commit.head_node_id
            head = next(p for p, it in enumerate(items) if it.source_node_id == at)
            assert items[head - 1].role == "user" and not items[head - 1].is_anchor
        if step.compact:  # the boundary folded, or its note says why not
            assert any(it.reason.startswith("compaction:") for it in gen.commit.items) or any(
                n.startswith("compaction: boundary") for n in gen.commit.notes
            )
