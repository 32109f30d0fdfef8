"""``check_promises``' own part, the pipeline's promise (system items locked and full,
the task anchor marked and full): the same findings as the specification below on
commits that break it in every way, and the task statement looked for only as far as
it is — a rerender checks every commit of a session, so a walk of every item's node
per commit grew with the square of the session."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from ctxrules.commit import Pipeline
from ctxrules.commit.anchor import task_anchor
from ctxrules.commit.invariants import InvariantViolation, check_promises
from ctxrules.config import PipelineConfig
from ctxrules.model import ContextCommit, ContextItem, Node

PIPELINE = Pipeline.from_config(PipelineConfig.preset("off"))


def _specification(commit: ContextCommit, nodes: Mapping[str, Node]) -> list[tuple[str, str]]:
    """The pipeline's promise as docs/rules.md states it, item list by item list: each
    item that breaks it and what it is (``system`` or ``task``)."""
    native = [it for it in commit.items if it.attached_from is None]
    broken = [
        ("system", it.source_node_id)
        for it in native
        if it.role == "system" and not (it.locked and it.state == "full")
    ]
    shown = [it for it in native if it.source_node_id in nodes]
    task = task_anchor((nodes[it.source_node_id] for it in shown), PIPELINE.anchor_skip)
    if task is not None:
        for it in shown:
            if it.source_node_id == task.id:
                broken += [("task", it.source_node_id)] * (
                    (not it.is_anchor) + (it.state != "full")
                )
    return broken


def _node(i: int, role: str, text: str) -> Node:
    return Node(id=f"n{i}", seq=i, created_at=float(i), role=role, output=text)


def _commit(items: list[ContextItem]) -> ContextCommit:
    return ContextCommit(
        id="cc_x",
        session_id="s",
        head_node_id=items[-1].source_node_id,
        rules_version="v",
        items=tuple(items),
    )


def _findings(commit: ContextCommit, nodes: Mapping[str, Node]) -> list[str]:
    try:
        check_promises(commit, PIPELINE, nodes)
    except InvariantViolation as exc:
        return [str(exc)]
    return []


NODES = {
    n.id: n
    for n in [
        _node(0, "system", "You are an agent."),
        _node(1, "user", "<system-reminder>context</system-reminder>"),
        _node(2, "user", "Fix the failing test in lib/net.py"),
        _node(3, "assistant", "Looking."),
        _node(4, "user", "Also keep MAX_RETRIES."),
    ]
}


def _item(i: int, **fields: object) -> ContextItem:
    node = NODES[f"n{i}"]
    base: dict[str, object] = {"source_node_id": node.id, "role": node.role, "rendered": "x"}
    return ContextItem(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "items",
    [
        # kept
        [_item(0, locked=True), _item(1), _item(2, is_anchor=True), _item(3), _item(4)],
        # a system item unlocked, another aged; the anchor not marked and aged
        [_item(0), _item(0, locked=True, state="aged"), _item(2, state="aged"), _item(4)],
        # the task statement shown twice, once attached from another commit
        [_item(2, is_anchor=True), _item(2, attached_from="cc_y", state="cleared"), _item(2)],
        # no real instruction shown: no anchor to check
        [_item(0, locked=True), _item(1), _item(3)],
    ],
)
def test_the_pipeline_promise_is_the_specification(items: list[ContextItem]) -> None:
    commit = _commit(items)
    spec = _specification(commit, NODES)
    found = _findings(commit, NODES)
    assert bool(found) == bool(spec)
    if spec:
        what, item = spec[0]
        assert item in found[0]
        assert ("system item" if what == "system" else "the task") in found[0]
        more = f"(and {len(spec) - 1} more)"
        assert (more in found[0]) == (len(spec) > 1)


class _Counting(Mapping[str, Node]):
    """Nodes by id, counting the lookups."""

    def __init__(self, nodes: Mapping[str, Node]) -> None:
        self.nodes, self.asked = nodes, 0

    def __getitem__(self, key: str) -> Node:
        self.asked += 1
        return self.nodes[key]

    def __contains__(self, key: object) -> bool:
        self.asked += 1
        return key in self.nodes

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)


def test_the_task_statement_is_looked_for_only_as_far_as_it_is() -> None:
    many = {f"n{i}": _node(i, "user" if i % 2 else "assistant", f"step {i}") for i in range(5, 400)}
    nodes = _Counting({**NODES, **many})
    items = [_item(0, locked=True), _item(1), _item(2, is_anchor=True), _item(3), _item(4)]
    items += [ContextItem(source_node_id=k, role=n.role, rendered="x") for k, n in many.items()]
    check_promises(_commit(items), PIPELINE, nodes)
    assert nodes.asked < 10  # the first three items' nodes, not all 400
