"""Needed-fact recall: did the request still show what the agent used next?

The recorded session says what the model needed.  For each assistant answer, the
*needed facts* are the exact identifiers it used — in its text and in its tool-call
arguments (``ctxrules.summarizers.facts.exact_identifiers``: paths and file names,
symbols, ``name(`` calls, error names and lines, CLI flags, URLs, hashes, numbers of
three digits or more) — that also occur, as whole tokens, in an earlier user or tool
message of its branch.  A good context shows each of them, as exact text, in the
request that produced the answer (``request_text`` of its body).

*Recall* is the share of needed facts the request shows; *older-fact recall* the same
for the facts that are not in the request's newest input (the user messages and tool
results after its last assistant message), which no rule should touch anyway: that is
where a context policy shows what it kept of the history.  Each lost fact names the
message it first appeared in (``source``) and the answer that needed it
(``needed_by``).

``FactIndex`` walks a branch in order and gives each answer its needed facts;
``score`` looks them up in a request; ``session_recall`` does both for every answer
of a branch whose request body is given.  Pure and deterministic: the same nodes and
bodies give the same report.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from ..model import Node, TextBlock, ToolUseBlock, content_text
from ..summarizers.facts import exact_identifiers_batch, normalize, occurs
from .text import RequestTexts

__all__ = [
    "FactIndex",
    "NeededFact",
    "RecallReport",
    "RequestRecall",
    "answer_facts",
    "score",
    "session_recall",
    "session_recalls",
]


class NeededFact(msgspec.Struct, frozen=True, kw_only=True):
    """An identifier an answer used that an earlier user or tool message holds.

    ``source`` is the first such message (a node id), ``needed_by`` the answer;
    ``older`` says it is not in the newest input of the answer's request; ``found``
    whether the request shows it (``False`` until ``score`` says)."""

    text: str
    kind: str
    source: str
    needed_by: str
    older: bool
    found: bool = False


class RequestRecall(msgspec.Struct, frozen=True, kw_only=True):
    """One request's needed facts: how many, how many it shows (``kept``), the same for
    the older ones, and the facts it lost."""

    answer: str
    needed: int
    kept: int
    older_needed: int
    older_kept: int
    lost: tuple[NeededFact, ...] = ()


class RecallReport(msgspec.Struct, frozen=True, kw_only=True):
    """Needed-fact recall of a session's requests (see the module docstring).

    ``recall`` = ``kept / needed`` and ``older_recall`` = ``older_kept /
    older_needed``, pooled over the requests (``None``: nothing was needed);
    ``requests`` has one entry per scored request in branch order, ``lost`` every lost
    fact of them in that order."""

    session_id: str
    requests: tuple[RequestRecall, ...]
    needed: int
    kept: int
    older_needed: int
    older_kept: int
    recall: float | None
    older_recall: float | None
    lost: tuple[NeededFact, ...]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def answer_facts(answer: Node) -> list[tuple[str, str]]:
    """``(kind, token)`` of every exact identifier an assistant answer used: in its text
    blocks and in the string arguments of its tool calls (thinking is not counted: it
    is the model's, often not kept, and not an action)."""
    out = answer.output
    texts: list[str] = []
    if isinstance(out, str):
        texts.append(out)
    else:
        for block in out:
            if isinstance(block, TextBlock):
                texts.append(block.text)
            elif isinstance(block, ToolUseBlock):
                texts.extend(_strings(block.input))
    seen: dict[str, str] = {}
    for found in exact_identifiers_batch(texts):
        for kind, token in found:
            seen.setdefault(normalize(token), kind)
    return [(kind, token) for token, kind in seen.items() if token]


_SEPARATOR = "\n\x00\n"


class FactIndex:
    """The user and tool messages of a branch so far, walked in order (``add``), and
    the needed facts of the next answer (``needed``)."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._starts: list[int] = []
        self._texts: list[str] = []
        self._size = 0
        self._joined = ""
        self._joined_count = 0
        self._newest: list[str] = []

    def add(self, node: Node) -> None:
        """Take the next node of the branch: a user message or a tool result is indexed
        (and is part of the newest input until the next answer); an answer starts a new
        newest input."""
        if node.role == "assistant" and node.caller is None:
            self._newest = []
            return
        if node.role not in ("user", "tool"):
            return
        text = normalize(content_text(node.output))
        if not text:
            return
        self._ids.append(node.id)
        self._starts.append(self._size)
        self._texts.append(text)
        self._size += len(text) + len(_SEPARATOR)
        self._newest.append(text)

    def _all(self) -> str:
        if self._joined_count != len(self._texts):
            self._joined = _SEPARATOR.join(self._texts)
            self._joined_count = len(self._texts)
        return self._joined

    def needed(self, answer: Node) -> list[NeededFact]:
        """The needed facts of ``answer``, the next node after those added so far (call
        it before adding the answer)."""
        everything = self._all()
        newest = _SEPARATOR.join(self._newest)
        facts: list[NeededFact] = []
        for kind, token in answer_facts(answer):
            at = occurs(token, everything)
            if at < 0:
                continue
            source = self._ids[bisect_right(self._starts, at) - 1]
            facts.append(
                NeededFact(
                    text=token,
                    kind=kind,
                    source=source,
                    needed_by=answer.id,
                    older=occurs(token, newest) < 0,
                )
            )
        return facts


def score(facts: Sequence[NeededFact], text: str, answer: str = "") -> RequestRecall:
    """The recall of one request whose normalised text is ``text`` (``request_text``)
    for ``facts``, the needed facts of its answer (``answer``: that answer's id)."""
    found = [msgspec.structs.replace(f, found=occurs(f.text, text) >= 0) for f in facts]
    older = [f for f in found if f.older]
    return RequestRecall(
        answer=answer or (facts[0].needed_by if facts else ""),
        needed=len(found),
        kept=sum(f.found for f in found),
        older_needed=len(older),
        older_kept=sum(f.found for f in older),
        lost=tuple(f for f in found if not f.found),
    )


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def session_recall(
    session_id: str, branch: Sequence[Node], bodies: Mapping[str, bytes]
) -> RecallReport:
    """The recall of every request of ``branch`` (root to head, ``dag.branch_path``
    order) whose body is in ``bodies`` (answer node id → the request body that produced
    that answer)."""
    return session_recalls(session_id, branch, [bodies])[0]


def session_recalls(
    session_id: str,
    branch: Sequence[Node],
    bodies: Sequence[Mapping[str, bytes]],
    *,
    memo: dict[bytes, str] | None = None,
) -> list[RecallReport]:
    """``session_recall`` of one branch for several sets of bodies (the requests of
    several replays of the session), in one walk: each answer's needed facts are found
    once, and a message the requests share is read once.

    ``memo``: ``request_text``'s memo to read the bodies with, for a caller that reads
    some of them again (it holds every message's text afterwards)."""
    index = FactIndex()
    scored: list[list[RequestRecall]] = [[] for _ in bodies]
    # The requests of a session repeat the messages before them: each is read once,
    # and each replay's request is read from its previous one (``RequestTexts``).
    memo = {} if memo is None else memo
    readers = [RequestTexts(memo) for _ in bodies]
    for node in branch:
        if node.role == "assistant" and node.caller is None:
            wanted = [i for i, b in enumerate(bodies) if node.id in b]
            if wanted:
                facts = index.needed(node)
                # Replays whose requests came out the same (rules that changed nothing
                # yet) share one score: the same body scores the same.
                same: dict[bytes, RequestRecall] = {}
                for i in wanted:
                    body = bodies[i][node.id]
                    got = same.get(body)
                    if got is None:
                        # An answer that needs no fact scores the same whatever its
                        # request holds: the body is not read (the reader reads the
                        # next one from the last body it read).
                        text = readers[i].text(body) if facts else ""
                        got = same[body] = score(facts, text, node.id)
                    scored[i].append(got)
        index.add(node)
    return [report(session_id, s) for s in scored]


def report(session_id: str, scored: Sequence[RequestRecall]) -> RecallReport:
    """The session's ``RecallReport`` of its scored requests, in order."""
    needed = sum(r.needed for r in scored)
    kept = sum(r.kept for r in scored)
    older_needed = sum(r.older_needed for r in scored)
    older_kept = sum(r.older_kept for r in scored)
    return RecallReport(
        session_id=session_id,
        requests=tuple(scored),
        needed=needed,
        kept=kept,
        older_needed=older_needed,
        older_kept=older_kept,
        recall=_share(kept, needed),
        older_recall=_share(older_kept, older_needed),
        lost=tuple(f for r in scored for f in r.lost),
    )
