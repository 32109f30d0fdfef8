"""Usage fusion: the provider's measurement of the last request on a branch, paired with
our estimate of that same request, so the next request's figure is ``measured + (our
estimate now − our estimate then)`` (step 5 of ``prepare``).

``UsageFusion`` is the part of ``Engine`` that finds measurements and the estimates
they pair with; it uses the engine's store, provider, pipeline and system prompt.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

from ..commit import Pipeline
from ..model import Node
from ..providers import Provider, Usage
from ..render import render
from ..requests import recorded_usage, request_for
from ..store import CommitStore
from .results import TokenFigures

__all__ = ["MEASUREMENT_LOOKBACK", "UsageFusion", "same_model", "sent_count"]

#: How many nodes ``prepare`` walks back looking for the last measured request (usage
#: fusion); sessions whose answers carry no usage stop there instead of at the root.
MEASUREMENT_LOOKBACK = 64
#: Nodes whose ``_step`` an engine remembers (it starts over past this).
_STEPS_KEPT = 1 << 16


class UsageFusion:
    """The engine's measurements: the last measured request on a branch, our estimate of
    it (recorded with the request or kept from when it was prepared; else — an answer
    to a request this engine never prepared — computed once and remembered), and the
    fused figure of a new request."""

    store: CommitStore
    provider: Provider
    pipeline: Pipeline
    counters: Counter[str]
    _estimates: dict[str, int]
    _prepared: OrderedDict[tuple[str, str], int]
    #: What each node says to the walk for a measurement (``_step``): nodes never change.
    _steps: dict[str, tuple[Node, int] | str | None]
    #: Where the walk back for a measurement ends from each node: what it finds there and
    #: how many nodes back (``_last_measurement``).
    _walks: dict[str, tuple[tuple[Node, int] | None, int]]

    def _defaults(
        self, session: str, at: str, info: Any, *, model: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def pipeline_for(self, model: str) -> Pipeline:
        raise NotImplementedError

    def _count(self, what: str) -> None:
        raise NotImplementedError

    def _system(self, session: str, commit: Any, metadata: Any, now: float) -> Any:
        raise NotImplementedError

    def _request_estimate(self, session: str, answer: Node) -> int:
        """Our estimate of the request that produced ``answer``: as recorded by ``record``,
        or as made when this engine prepared it (at the answer's predecessor); else —
        an imported answer — computed once and remembered (``fusion_renders``)."""
        req = answer.metadata.get("request")
        if isinstance(req, Mapping) and isinstance(req.get("estimate"), int):
            return int(req["estimate"])
        if answer.predecessor is not None:
            prepared = self._prepared.get((session, answer.predecessor))
            if prepared is not None:
                return prepared
        if answer.id not in self._estimates:
            self._count("fusion_renders")
            info = self.store.get_session(session)
            model, options = self._defaults(session, answer.id, info)
            # The rules of that request, priced at the model it was sent to.
            request = request_for(self.store, session, answer.id, config=self.pipeline_for(model))
            rendered = render(
                request.commit,
                self.provider,
                model,
                estimate=True,
                system=self._system(
                    session, request.commit, info.metadata, request.sent_at
                ).texts(),
                **options,
            )
            made = rendered.estimate
            self._estimates[answer.id] = made.input_tokens if made is not None else 0
        return self._estimates[answer.id]

    def _step(self, node_id: str) -> tuple[Node, int] | str | None:
        """What node ``node_id`` tells the walk back for a measurement: ``(node, billed)``
        when it is an answer whose request the provider measured, ``None`` when the walk
        stops there (a compaction, or the first node), else the node before it.  Worked
        out once per node (a turn would otherwise read its history back from the store)."""
        steps = self._steps
        if node_id in steps:
            return steps[node_id]
        node = self.store.get_node(node_id)
        out: tuple[Node, int] | str | None = node.predecessor
        if node.metadata.get("compaction") is not None:
            out = None  # what was measured before a compaction is not carried now
        elif node.role == "assistant" and node.caller is None:
            usage = recorded_usage(self.provider, node.metadata.get("usage"))
            if usage is not None and usage.prompt_tokens > 0:
                # Paired with our estimate of the request as sent: when the vendor
                # compacted it, its count of that request is the compaction step's.
                sent = sent_count(usage)
                out = (node, sent if sent is not None else usage.prompt_tokens)
        if len(steps) >= _STEPS_KEPT:
            steps.clear()
        steps[node_id] = out
        return out

    def _last_measurement(self, session: str, head: str) -> tuple[Node, int] | None:
        """The newest answer at or before ``head`` on its branch whose request the provider
        measured, and that measurement (within ``MEASUREMENT_LOOKBACK`` nodes).

        The walk back ends at the first node whose ``_step`` is not a node to go on to;
        where it ends and how far that is from each node it passed is remembered
        (``_walks``: nodes never change), so a turn walks only the nodes added since."""
        walks = self._walks
        passed: list[str] = []  # nodes the walk went through, newest first
        at = head
        end: tuple[tuple[Node, int] | None, int] | None = None  # (what it found, distance)
        while len(passed) < MEASUREMENT_LOOKBACK:
            end = walks.get(at)
            if end is not None:
                break
            step = self._step(at)
            if not isinstance(step, str):
                end = (step, 0)
                break
            passed.append(at)
            at = step
        if len(walks) >= _STEPS_KEPT:
            walks.clear()
        if end is None:  # nothing within reach of ``head``, so of any node after it either
            walks[head] = (None, 0)
            return None
        found, distance = end
        walks[at] = end
        for k, node in enumerate(reversed(passed), 1):
            walks[node] = (found, distance + k)
        return found if distance + len(passed) < MEASUREMENT_LOOKBACK else None

    def _fuse(self, session: str, head: str, estimate: int) -> TokenFigures:
        found = self._last_measurement(session, head)
        if found is None:
            return TokenFigures(estimate=estimate, fused=estimate)
        answer, billed = found
        before = self._request_estimate(session, answer)
        return TokenFigures(
            estimate=estimate,
            fused=max(0, billed + estimate - before),
            measured=billed,
            measured_estimate=before,
            measured_node=answer.id,
        )

    def _measured_at(
        self, session: str, head: str, model: str
    ) -> tuple[int, int, int | None] | None:
        """``(billed, our estimate, the vendor's count of the request as sent when it
        compacted it)`` when ``head`` is still described by a measurement:
        the head is an answer with usage under ``model``, or only answers without usage
        follow the last one that had it, and no tool result came back since."""
        node: Node | None = self.store.get_node(head)
        if node is not None and self.store.children(node.id, session_id=session, edge="caller"):
            return None  # tool results came back since: the next request carries them
        while node is not None and node.role == "assistant" and node.caller is None:
            usage = recorded_usage(self.provider, node.metadata.get("usage"))
            if usage is not None and usage.prompt_tokens > 0:
                if node.name and model and not same_model(node.name, model):
                    return None  # the model changed: the measurement says nothing now
                return usage.prompt_tokens, self._request_estimate(session, node), sent_count(usage)
            if node.metadata.get("usage") is not None:
                return None
            node = self.store.get_node(node.predecessor) if node.predecessor else None
        return None


def sent_count(usage: Usage) -> int | None:
    """The vendor's count of a request as it was sent, when the vendor compacted it on
    its side (``Usage.compaction``); ``None`` otherwise (the billed prompt is that)."""
    step = usage.compaction
    return step.prompt_tokens if step is not None and step.prompt_tokens > 0 else None


def same_model(a: str, b: str) -> bool:
    """Whether two model names name the same model (a dated id and its alias match)."""
    return a == b or a.startswith(b + "-") or b.startswith(a + "-")
