"""The rule author's test kit: check a rule against the commit invariants in a few lines.

::

    from ctxrules.testing import check_rule

    def test_my_rule_keeps_the_invariants():
        check_rule(MyRule(some_param=3))            # alone and inside the built-in pipeline

``check_rule`` generates sessions with hypothesis (tool calls of protected and ordinary
tools, huge and failing results, branches, attach pointers, merges, locked and pinned
nodes, system nodes, lines that are not the task, time gaps, compaction boundaries in
full and around a pivot), derives commits turn by turn through the pipeline (summary
requests answered by the registered summarizers) and asserts invariants 1–8
(docs/rules.md)
plus the consistency a renderer relies on (tool pairing, token totals, attach blocks
folded whole), the promise of every rule in the pipeline (``Rule.check_promise``) and
the pipeline's own promise (``PIPELINE_PROMISE``: system items and the task anchor —
the first real instruction, as ``ctxrules.commit.anchor.task_anchor`` picks it — are
never folded, aged or cleared).  ``check_commits`` runs the same checks on commits you
produced yourself, e.g. from a real transcript; ``check_promises`` only the promises;
``tool_turn`` + ``commit_of`` build one hand-written case in two lines.  A failure
raises ``InvariantViolation`` naming the invariant or promise, the rule set and the
item.

Installed as a pytest plugin (entry point ``pytest11: ctxrules``): the fixture
``ctxrules_kit`` is this module.  hypothesis is imported only when a check runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .commit import Compaction, Generated, Pipeline, derive_with_summaries
from .commit.anchor import task_anchor
from .commit.boundary import COMPACTION_KEY
from .commit.context import item_text_for_tokens
from .commit.delta import Delta, replay
from .commit.items import merge_parents
from .config import PRESETS, PipelineConfig
from .errors import CtxrulesError
from .model import STATE_RANK, Call, ContextCommit, ContextItem, TextBlock, ToolUseBlock
from .rules.base import Rule

__all__ = [
    "NOT_TASK",
    "PIPELINE_PROMISE",
    "InvariantViolation",
    "Script",
    "Step",
    "check_commits",
    "check_promises",
    "check_rule",
    "commit_of",
    "drive",
    "drive_branch",
    "pipelines_with",
    "scripts",
    "tool_turn",
]

TOOL_NAMES = ("Read", "Bash", "Grep", "Edit", "todo_update", "web_search", "TodoWrite")


class InvariantViolation(AssertionError):
    """A commit broke an invariant; the message names which, where and under which rules."""


def _fail(number: str, message: str, pipeline: Pipeline, commit: ContextCommit) -> None:
    rules = ", ".join(r.name for r in pipeline.rules) or "no rules"
    what = number if number.startswith("promise") else f"invariant {number}"
    raise InvariantViolation(
        f"{what}: {message} (commit {commit.id} at {commit.head_node_id}; rules: {rules})"
    )


# -- checks ------------------------------------------------------------------------------


#: What every pipeline promises besides its rules' promises, whatever the rules.
PIPELINE_PROMISE = "system items and the task anchor are never folded, aged or cleared"


def _protected_broken(
    commit: ContextCommit, pipeline: Pipeline, nodes: Mapping[str, Call] | None
) -> list[str]:
    """Where ``commit`` breaks ``PIPELINE_PROMISE``: a system item that is not locked or
    not full (while the pipeline locks them), and a task anchor — ``task_anchor`` of the
    commit's own nodes, when ``nodes`` are given — not marked as one or not full."""
    broken: list[str] = []
    native = [it for it in commit.items if it.attached_from is None]
    if pipeline.lock_system:
        broken.extend(
            f"system item {it.source_node_id} is {it.state if it.locked else 'not locked'}"
            for it in native
            if it.role == "system" and (not it.locked or it.state != "full")
        )
    if pipeline.anchor_task and nodes is not None:
        shown = [it for it in native if it.source_node_id in nodes]
        task = task_anchor((nodes[it.source_node_id] for it in shown), pipeline.anchor_skip)
        for it in shown:
            if task is not None and it.source_node_id == task.id:
                if not it.is_anchor:
                    broken.append(
                        f"the task statement {it.source_node_id} (the first real "
                        "instruction) is not the anchor"
                    )
                if it.state != "full":
                    broken.append(f"the task anchor {it.source_node_id} is {it.state}")
    return broken


def check_promises(
    commit: ContextCommit, pipeline: Pipeline, nodes: Mapping[str, Call] | None = None
) -> None:
    """Assert that ``commit`` keeps the promise of every rule of ``pipeline`` (the
    pipeline that derived it, from the start of its chain) and ``PIPELINE_PROMISE``.

    The task anchor is checked when ``nodes`` (the nodes by id, as ``drive`` and
    ``drive_branch`` give them) are passed: which node is the first real instruction
    depends on their metadata, which items do not carry.
    """
    broken = _protected_broken(commit, pipeline, nodes)
    if broken:
        more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        _fail(
            "promise of the pipeline",
            f"{PIPELINE_PROMISE} — broken: {broken[0]}{more}",
            pipeline,
            commit,
        )
    for rule in pipeline.rules:
        broken = rule.check_promise(commit)
        if broken:
            more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
            _fail(
                f"promise of rule {rule.name!r}",
                f"{rule.promise or 'its promise'} — broken: {broken[0]}{more}",
                pipeline,
                commit,
            )


def _key(it: ContextItem) -> tuple[str, str | None]:
    return (it.source_node_id, it.attached_from)


def check_step(
    parent: ContextCommit | None,
    gen: Generated,
    *,
    pipeline: Pipeline,
    node_ids: Set[str] | Mapping[str, Call],
    parent_bytes: bytes | None,
    counter: Any,
) -> None:
    """Assert the invariants for one derived commit against its parent."""
    c = gen.commit
    if gen.requests:
        rules = sorted({r.rule for r in gen.requests})
        _fail("summaries", f"summary requests of {rules} left unanswered", pipeline, c)
    if parent is not None and parent_bytes is not None:
        if msgspec.msgpack.encode(parent) != parent_bytes:
            _fail("2", "deriving a child changed the saved parent commit", pipeline, c)
    _check_parents(parent, c, pipeline, node_ids)
    seen_attach: dict[str, int] = {}
    prev_from: str | None = None
    total = 0
    present: dict[str, ContextItem] = {}
    for it in c.items:
        if it.attached_from is None:
            present[it.source_node_id] = it
        if it.attached_from != prev_from and it.attached_from is not None:
            seen_attach[it.attached_from] = seen_attach.get(it.attached_from, 0) + 1
        prev_from = it.attached_from
        if it.state == "summary" or it.source_node_id.startswith("sm_"):
            if not (it.state == "summary" or it.state == "summarized"):
                _fail("5", f"virtual item {it.source_node_id} in state {it.state}", pipeline, c)
            if it.source_node_id in node_ids:
                _fail("5", f"summary id {it.source_node_id} is a DAG node", pipeline, c)
        elif it.attached_from is None and it.source_node_id not in node_ids:
            _fail("5", f"item {it.source_node_id} names no DAG node", pipeline, c)
        if it.state != "summarized":
            total += it.tokens
    for src, blocks in seen_attach.items():
        if blocks != 1:
            _fail("6", f"attach of {src} expanded {blocks} times", pipeline, c)
    if total != c.total_tokens:
        _fail("tokens", f"total_tokens {c.total_tokens} != sum of items {total}", pipeline, c)
    # Pairing: a tool result and its caller are shown together or folded together (a
    # shown result without its call is an orphan, a shown call without its result is
    # unanswered: both are refused by providers).
    folded_in_block: dict[str, set[bool]] = {}
    for it in c.items:
        folded = it.state == "summarized"
        if it.attached_from is not None:
            folded_in_block.setdefault(it.attached_from, set()).add(folded)
        elif it.role == "tool" and it.caller:
            caller = present.get(it.caller)
            if caller is not None and (caller.state == "summarized") != folded:
                what = "caller folded" if not folded else "caller shown"
                _fail("pairing", f"tool {it.source_node_id} {it.state}, {what}", pipeline, c)
    for src, states in folded_in_block.items():  # an attach block folds whole or not at all
        if len(states) > 1:
            _fail("attach", f"the attach block of {src} was split by folding", pipeline, c)
    if parent is not None:
        old = {_key(it): it for it in parent.items}
        new = {_key(it): it for it in c.items}
        for k, before in old.items():
            after = new.get(k)
            if after is None:
                _fail("3", f"item {k[0]} disappeared", pipeline, c)
                continue
            if before.locked and after != before:
                _fail("4", f"locked item {k[0]} was modified", pipeline, c)
            if (
                STATE_RANK[after.state] < STATE_RANK[before.state]
                or (before.state == "summary" and after.state not in ("summary", "summarized"))
                or (before.state == "summarized" and after != before)
            ):
                _fail("3", f"item {k[0]} went {before.state} → {after.state}", pipeline, c)
    # Token counts of what this commit touched are exact (unchanged ones were checked
    # when they were made).
    # The stored delta must rebuild exactly this commit from its parent: a rule that
    # bypassed ctx.replace / ctx.fold would make the store disagree with the commit.
    rebuilt: list[ContextItem] = list(parent.items) if parent is not None else []
    replay(rebuilt, gen.delta)
    if tuple(rebuilt) != c.items:
        _fail(
            "2",
            "the commit's stored delta does not rebuild it (a rule changed items "
            "without ctx.replace / ctx.fold)",
            pipeline,
            c,
        )
    changed = msgspec.msgpack.decode(gen.delta, type=Delta)[1]
    texts: list[str] = []
    for _, it in changed:
        texts.extend(item_text_for_tokens(it))
    counts = iter(counter.count_batch(texts))
    for _, it in changed:
        n = sum(next(counts) for _ in item_text_for_tokens(it))
        if n != it.tokens:
            _fail(
                "tokens", f"item {it.source_node_id} says {it.tokens} tokens, is {n}", pipeline, c
            )


def _check_parents(
    parent: ContextCommit | None,
    c: ContextCommit,
    pipeline: Pipeline,
    node_ids: Set[str] | Mapping[str, Call],
) -> None:
    """Invariant 7: a commit's parents are the commit it was derived from, then — only
    when it adds a merge instruction node — the peer commits that node names."""
    merged: list[str] = []
    if parent is not None and isinstance(node_ids, Mapping):
        before = {it.source_node_id for it in parent.items}
        for it in c.items:
            node = node_ids.get(it.source_node_id)
            if it.attached_from is None and node is not None and it.source_node_id not in before:
                merged.extend(merge_parents(node))
    expected = tuple(dict.fromkeys((parent.id, *merged))) if parent is not None else ()
    if c.parent_ids == expected:
        return
    if len(c.parent_ids) > 1 and not merged:
        known = "" if isinstance(node_ids, Mapping) else " (pass the nodes to check a merge)"
        _fail("7", f"{len(c.parent_ids)} parents outside a merge{known}", pipeline, c)
    _fail("7", f"parents {list(c.parent_ids)}, expected {list(expected)}", pipeline, c)


def _check_render(commit: ContextCommit, pipeline: Pipeline) -> None:
    try:
        from .render import render_commit
    except Exception:  # the renderer is another layer; without it invariant 8 is its own test
        return
    first = msgspec.json.encode(render_commit(commit))
    again = msgspec.json.encode(
        render_commit(msgspec.json.decode(msgspec.json.encode(commit), type=ContextCommit))
    )
    if first != again:
        _fail("8", "render_commit gave different bytes for the same commit", pipeline, commit)


# -- scripted sessions ---------------------------------------------------------------------


@dataclass
class Step:
    """One turn of a script: where it branches from, what it adds, when it happens."""

    branch_back: int = 0  # 0: continue HEAD; k: start from the head k steps earlier
    user: str = "do it"
    assistant: str = "ok"
    tools: list[tuple[str, int, bool]] = field(default_factory=list)  # (name, size, error)
    minutes: float = 1.0
    attach_back: int = 0  # attach the commit of k steps earlier (-1: an unloadable one)
    merge_back: int = 0  # merge the commits of k steps earlier and of the first step
    locked: bool = False
    pinned: bool = False
    cite_back: int = 0
    system: str = ""  # a system node before the user node
    kind: str = "task"  # "task", or a NOT_TASK kind: the user node is that line instead
    compact: str = ""  # "full" / "from" / "up_to": a compaction boundary after the turn


#: Lines that are not the task statement, as real transcripts have them before it:
#: skip kind → (text, node metadata).  A ``Step`` of one of these kinds sends that
#: line in place of its user text (``{}`` in the text is the step's text).
NOT_TASK: dict[str, tuple[str, dict[str, Any]]] = {
    # SWE-agent: only the metadata says so (the text is ordinary).
    "demonstration": ("{}", {"extra": {"is_demo": True, "message_type": "demonstration"}}),
    "command": (
        "<command-message>fix is running…</command-message>\n"
        "<command-name>/fix</command-name>\n<command-args>{}</command-args>",
        {"claude_code": {"type": "user"}},
    ),
    "caveat": (
        "Caveat: The messages below were generated by the user while running local "
        "commands. DO NOT respond to these messages or otherwise consider them in your "
        "response unless the user explicitly asks you to.",
        {"claude_code": {"type": "user", "isMeta": True}},
    ),
    "local_command": ("<local-command-stdout>{}</local-command-stdout>", {}),
    "system_reminder": ("<system-reminder>{}</system-reminder>", {}),
}


@dataclass
class Script:
    """A generated session: steps to drive through a pipeline."""

    steps: list[Step]


def scripts(max_steps: int = 10) -> Any:
    """A hypothesis strategy of ``Script`` s."""
    from hypothesis import strategies as st

    words = st.sampled_from(
        [
            "fix",
            "the",
            "bug",
            "in",
            "src/app.py",
            "you must not touch tests",
            "never push",
            "README.md",
            "please",
            "always run make test",
            "日本語",
            "ünïcode",
            "\n",
        ]
    )
    text = st.lists(words, min_size=1, max_size=12).map(" ".join)
    tool = st.tuples(
        st.sampled_from(TOOL_NAMES),
        st.sampled_from([0, 40, 300, 1500, 6000]),
        st.booleans(),
    )
    step = st.builds(
        Step,
        branch_back=st.sampled_from([0, 0, 0, 0, 1, 2]),
        user=text,
        assistant=text,
        tools=st.lists(tool, max_size=3),
        minutes=st.sampled_from([0.0, 1.0, 7.0, 61.0, 180.0]),
        attach_back=st.sampled_from([0, 0, 0, 0, 1, 3, -1]),
        merge_back=st.sampled_from([0, 0, 0, 0, 0, 1, 2]),
        locked=st.sampled_from([False, False, False, False, True]),
        pinned=st.sampled_from([False, False, False, True]),
        cite_back=st.sampled_from([0, 0, 0, 2]),
        system=st.sampled_from(["", "", "", "You are careful. Always run make test."]),
        kind=st.sampled_from(["task"] * 5 + list(NOT_TASK)),
        compact=st.sampled_from(["", "", "", "", "", "", "full", "from", "up_to"]),
    )
    return st.lists(step, min_size=1, max_size=max_steps).map(Script)


def tool_turn(
    *results: Mapping[str, Any],
    user: str = "go",
    assistant: str = "ok",
    prefix: str = "",
    predecessor: str | None = None,
    seq: int = 1,
    reads: Sequence[str] = (),
) -> list[Call]:
    """The nodes of one turn: a user request, an assistant calling one tool per entry
    of ``results``, and the results, for hand-written cases next to ``check_rule``.

    Each entry has ``output`` and optionally ``name`` (default ``Bash``), ``input`` and
    ``metadata``.  Ids are ``<prefix>u``, ``<prefix>a`` and ``<prefix>t1``, ``<prefix>t2``…
    (also the vendor call ids); seqs count up from ``seq``.
    """
    u, a = f"{prefix}u", f"{prefix}a"
    tools = [(f"{prefix}t{k + 1}", r) for k, r in enumerate(results)]
    uses = [ToolUseBlock(id=tid, name=r.get("name", "Bash"), input={}) for tid, r in tools]
    calls = [
        Call(
            id=u,
            seq=seq,
            created_at=0.0,
            role="user",
            output=user,
            predecessor=predecessor,
            reads=tuple(reads),
        ),
        Call(
            id=a,
            seq=seq + 1,
            created_at=0.0,
            role="assistant",
            predecessor=u,
            output=[TextBlock(text=assistant), *uses],
        ),
    ]
    for k, (tid, r) in enumerate(tools):
        calls.append(
            Call(
                id=tid,
                seq=seq + 2 + k,
                created_at=0.0,
                role="tool",
                name=r.get("name", "Bash"),
                caller=a,
                input=r.get("input", {}),
                output=r["output"],
                metadata={"tool_use_id": tid, **r.get("metadata", {})},
            )
        )
    return calls


def commit_of(
    rules: Sequence[Rule] | Pipeline, calls: Sequence[Call], *, now: float = 0.0
) -> ContextCommit:
    """The first commit of ``calls`` (e.g. from ``tool_turn``) under ``rules``, headed
    at the last conversation node."""
    pipeline = rules if isinstance(rules, Pipeline) else Pipeline.of(rules)
    head = next(c.id for c in reversed(calls) if c.caller is None)
    return derive_with_summaries(
        None, calls, session_id="s", head_node_id=head, pipeline=pipeline, now=now
    ).commit


def _filler(size: int, seed: int) -> str:
    """``size`` characters of log-like text, as token-dense as real tool output (every
    line differs), so a few large results reach the summarize thresholds."""
    lines = []
    n = 0
    k = 0
    while n < size:
        line = f"{seed}.{k} /repo/src/mod{seed % 7}.py v={(seed * 7919 + k * 104729) % 1000003:x}\n"
        lines.append(line)
        n += len(line)
        k += 1
    return "".join(lines)[:size]


def drive(script: Script, pipeline: Pipeline, *, start: float = 1_000_000.0) -> list[Any]:
    """Run a script through ``pipeline``; returns ``[(parent, generated, nodes)]``
    (``nodes``: every node made so far, by id)."""
    seq = itertools.count(1)
    calls: dict[str, Call] = {}
    heads: list[str] = []
    commits: list[ContextCommit] = []
    by_id: dict[str, ContextCommit] = {}
    out: list[Any] = []
    now = start

    def node(role: str, **kw: Any) -> Call:
        n = next(seq)
        call = Call(id=f"n{n}", seq=n, created_at=now, role=role, **kw)  # type: ignore[arg-type]
        calls[call.id] = call
        return call

    for i, step in enumerate(script.steps):
        now += step.minutes * 60.0
        base = len(heads) - 1 - step.branch_back if heads else -1
        base = max(base, -1)
        parent = commits[base] if base >= 0 else None
        prev = heads[base] if base >= 0 else None
        new: list[Call] = []
        if step.attach_back and commits:
            target = (
                commits[max(0, len(commits) - step.attach_back)] if step.attach_back > 0 else None
            )
            ref = {"session": "other", "head": "h", "commit": target.id if target else "cc_missing"}
            ptr = node("user", output="attach", predecessor=prev, metadata={"attach": ref})
            new.append(ptr)
            prev = ptr.id
        merge: dict[str, Any] = {}
        if step.merge_back and commits:
            # A merge as ctxrules.engine.merge writes it: one pointer per peer (the
            # base's locked), then the instruction naming the peer commits.
            peers = list(
                dict.fromkeys([commits[max(0, len(commits) - step.merge_back)].id, commits[0].id])
            )
            for k, cid in enumerate(peers):
                ref = {"session": "peer", "head": "h", "commit": cid}
                ptr = node(
                    "user",
                    output="attach",
                    predecessor=prev,
                    metadata={"attach": ref, "locked": k == 0},
                )
                new.append(ptr)
                prev = ptr.id
            merge = {
                "merge": {
                    "into": parent.id if parent else "",
                    "base": peers[0],
                    "peers": [{"session": "peer", "head": "h", "commit": c} for c in peers],
                }
            }
        meta: dict[str, Any] = {}
        if step.locked:
            meta["locked"] = True
        if step.pinned:
            meta["pinned"] = True
        reads: tuple[str, ...] = ()
        if step.cite_back and len(heads) > step.cite_back:
            reads = (heads[-step.cite_back],)
        if step.system:
            sysnode = node("system", input=step.system, predecessor=prev, metadata=dict(meta))
            new.append(sysnode)
            prev = sysnode.id
        text = step.user
        if step.kind != "task":
            template, kind_meta = NOT_TASK[step.kind]
            text = template.replace("{}", step.user)
            meta = {**kind_meta, **meta}
        user = node("user", output=text, predecessor=prev, metadata={**meta, **merge}, reads=reads)
        uses = [
            ToolUseBlock(id=f"tu{i}_{k}", name=t[0], input={"path": f"src/f{k}.py"})
            for k, t in enumerate(step.tools)
        ]
        asst = node(
            "assistant", output=[TextBlock(text=step.assistant), *uses], predecessor=user.id
        )
        new += [user, asst]
        for k, (name, size, error) in enumerate(step.tools):
            new.append(
                node(
                    "tool",
                    name=name,
                    input={"path": f"src/f{k}.py"},
                    output=_filler(size, i + k),
                    caller=asst.id,
                    metadata={"tool_use_id": f"tu{i}_{k}", "is_error": error, **meta},
                )
            )
        head = asst.id
        if step.compact:  # a compaction boundary around this turn's request
            full = step.compact == "full"
            record = Compaction(
                trigger="manual" if full else "partial",
                direction=step.compact,  # type: ignore[arg-type]
                pivot=None if full else user.id,
                previous=asst.id,
            )
            boundary = node(
                "system", predecessor=asst.id, metadata={COMPACTION_KEY: record.to_metadata()}
            )
            new.append(boundary)
            head = boundary.id
        snapshot = {cid: msgspec.msgpack.encode(c) for cid, c in calls.items()}
        gen, again = (
            _derive(
                parent,
                new,
                session_id="s",
                head_node_id=head,
                pipeline=pipeline,
                now=now,
                load_commit=by_id.get,
            )
            for _ in range(2)
        )
        for cid, c in calls.items():  # invariant 1: the pipeline never touches nodes
            if msgspec.msgpack.encode(c) != snapshot[cid]:
                _fail("1", f"node {cid} changed during generation", pipeline, gen.commit)
        if again.commit.id != gen.commit.id or again.delta != gen.delta:
            _fail(
                "2",
                "the same inputs gave a different commit (ids are content-addressed)",
                pipeline,
                gen.commit,
            )
        out.append((parent, gen, dict(calls)))
        heads.append(head)
        commits.append(gen.commit)
        by_id[gen.commit.id] = gen.commit
    return out


def drive_branch(
    path: Sequence[Call], pipeline: Pipeline, *, session_id: str = "s", delay: float = 0.0
) -> list[Any]:
    """Derive the commits of a recorded branch head by head, each from the previous one;
    returns ``[(parent, generated, nodes)]`` for ``check_commits`` (``nodes``: the
    branch's nodes so far, by id).

    ``path`` is a branch in ``dag.branch_path`` order (e.g. of an imported transcript);
    a commit is made at every conversation node, with the calls under it, at ``now`` =
    the turn's last ``created_at`` + ``delay`` seconds.
    """
    turns: list[tuple[str, list[Call]]] = []
    for call in path:
        if call.caller is None:
            turns.append((call.id, [call]))
        elif turns:
            turns[-1][1].append(call)
    runs: list[Any] = []
    parent: ContextCommit | None = None
    seen: dict[str, Call] = {}
    for head, calls in turns:
        seen.update((c.id, c) for c in calls)
        before = [msgspec.msgpack.encode(c) for c in calls]
        gen = _derive(
            parent,
            calls,
            session_id=session_id,
            head_node_id=head,
            pipeline=pipeline,
            now=calls[-1].created_at + delay,
        )
        if [msgspec.msgpack.encode(c) for c in calls] != before:
            _fail(
                "1", f"a node of the turn at {head} changed during generation", pipeline, gen.commit
            )
        runs.append((parent, gen, dict(seen)))
        parent = gen.commit
    return runs


def _derive(*args: Any, **kwargs: Any) -> Generated:
    try:
        return derive_with_summaries(*args, **kwargs)
    except CtxrulesError as exc:
        raise InvariantViolation(f"generation failed: {exc}") from exc


def check_commits(runs: Iterable[Any], pipeline: Pipeline) -> int:
    """Check every ``(parent, generated, nodes)`` of ``drive`` (or your own) against the
    invariants, the promises of ``pipeline``'s rules and ``PIPELINE_PROMISE``; returns
    how many commits were checked.

    ``nodes`` is a mapping of node id → ``Call`` (what ``drive`` and ``drive_branch``
    give), or a set of node ids: then the task anchor is not checked.
    """
    counter = pipeline.tokenizer
    n = 0
    for parent, gen, node_ids in runs:
        pb = msgspec.msgpack.encode(parent) if parent is not None else None
        check_step(
            parent, gen, pipeline=pipeline, node_ids=node_ids, parent_bytes=pb, counter=counter
        )
        check_promises(gen.commit, pipeline, node_ids if isinstance(node_ids, Mapping) else None)
        _check_render(gen.commit, pipeline)
        n += 1
    return n


def pipelines_with(rule: Rule | None = None) -> list[Pipeline]:
    """Every shipped configuration, each with ``rule`` added in front — or in the place
    of the configuration's rule of the same name — plus ``rule`` alone."""
    out = []
    for name in PRESETS:
        shipped = Pipeline.from_config(PipelineConfig.preset(name))
        rules: Sequence[Rule] = shipped.rules
        if rule is not None:
            same = [i for i, r in enumerate(rules) if r.name == rule.name]
            rules = [rule if i in same else r for i, r in enumerate(rules)]
            if not same:
                rules.insert(0, rule)
        out.append(shipped.with_rules(rules))
    if rule is not None:
        out.append(Pipeline.of([rule]))
    return out


def check_rule(
    rule: Rule | None = None,
    *,
    examples: int = 40,
    pipelines: Sequence[Pipeline] | None = None,
    max_steps: int = 10,
) -> None:
    """Property-test ``rule`` (alone and in front of every shipped configuration) against
    the invariants and every rule's promise on ``examples`` generated sessions per
    pipeline."""
    for pipeline in pipelines if pipelines is not None else pipelines_with(rule):
        _property(pipeline, examples, max_steps)()


def _property(pipeline: Pipeline, examples: int, max_steps: int) -> Any:
    from hypothesis import HealthCheck, given, settings

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scripts(max_steps))
    def run(script: Script) -> None:
        try:
            check_commits(drive(script, pipeline), pipeline)
        except CtxrulesError as exc:
            raise InvariantViolation(f"generation failed: {exc}") from exc

    return run


# -- pytest plugin ---------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - the kit works without pytest too
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def ctxrules_kit() -> Any:
        """This module, for tests that prefer a fixture to an import."""
        import sys

        return sys.modules[__name__]
