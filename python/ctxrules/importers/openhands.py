"""OpenHands trajectories: an event list (JSON), or evaluation output (``output.jsonl``).

An evaluation's ``output.jsonl`` holds one instance per line (``instance_id``,
``instruction``, ``history``: the event list, ``metadata``: the run's configuration,
``test_result``, …); each instance becomes a session of its own, titled by its
``instance_id``, the line's other fields kept in the session metadata under
``evaluation``.  The file is read a line at a time; a re-import finds the instances
already imported (each is keyed by its line's bytes), so an output that grew adds its
new instances; a last line cut off while being written is left out with a warning.

Events map onto the DAG as follows:

* a user ``message`` action → user node; an agent ``message`` → assistant node; a
  ``system`` action → system node;
* agent actions carrying ``tool_call_metadata`` → one assistant node per model response
  (``model_response.id``; a response with several tool calls gives several actions),
  with the response's text, ``tool_use`` blocks and ``usage``;
* an observation whose ``tool_call_metadata`` names one of those calls → tool node
  under that assistant node (``name`` = function, ``input`` = its arguments);
* everything else (state changes, empty observations) is kept in the session metadata
  under ``events``.

The tool declarations the agent sent (``args.tools`` of the system event) are the
session metadata's ``tools``; its ``model`` is the first response's model, else the
run's configured one (``metadata.llm_config.model``).  OpenHands calls every provider
through LiteLLM and records Chat Completions shapes, so no ``provider`` is recorded.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

from ..errors import TranscriptWarning
from ..model import ContentBlock, TextBlock, ToolUseBlock
from ..providers.responses import tool_arguments
from ._common import ImportedSession, SessionBuilder, fail, parse_time, read_bytes
from ._json import JsonImporter, open_jsonl
from ._messages import _image_from_url

__all__ = ["OpenHandsImporter"]

#: An evaluation output line starts with its ``instance_id`` (how OpenHands writes it).
_OUTPUT_LINE = re.compile(rb'^\s*\{\s*"instance_id"\s*:')


def _response_message(tcm: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    resp = tcm.get("model_response") if isinstance(tcm.get("model_response"), dict) else {}
    choices = resp.get("choices") if isinstance(resp, dict) else None
    msg = choices[0].get("message") if isinstance(choices, list) and choices else None
    return resp or {}, msg if isinstance(msg, dict) else {}


class _Parser:
    def __init__(
        self, path: str, events: list[Any], key: str, base: str = "", line: int | None = None
    ):
        self.path = path
        self.events = events
        self.base = base  # the events' path in the document: "", "events" or "history"
        self.line = line  # the JSONL line holding the events (evaluation output)
        self.b = SessionBuilder(key, path, "openhands")
        self.last: str | None = None
        self.responses: dict[str, str] = {}  # model_response id -> assistant node
        self.calls: dict[str, tuple[str, str, dict[str, Any]]] = {}  # call id -> node, name, args
        self.kept: list[Any] = []

    def where(self, i: int) -> dict[str, Any]:
        """Where event ``i`` is: its path in the document (and its JSONL line)."""
        return {"at": f"{self.base}[{i}]", "line": self.line}

    def time(self, i: int, ev: dict[str, Any]) -> float:
        return parse_time(
            ev.get("timestamp"), path=self.path, line=self.line, at=f"{self.base}[{i}].timestamp"
        )

    def conversation(self, role: str, output: Any, i: int, ev: dict[str, Any], **kw: Any) -> None:
        self.last = self.b.add(
            role,
            output,
            pos=i,
            predecessor=self.last,
            metadata={"openhands": {k: v for k, v in ev.items() if k != "tool_call_metadata"}},
            created_at=self.time(i, ev),
            **self.where(i),
            **kw,
        )

    def tool_action(self, i: int, ev: dict[str, Any], tcm: dict[str, Any]) -> None:
        resp, msg = _response_message(tcm)
        rid = str(resp.get("id") or f"event:{ev.get('id')}")
        if rid in self.responses:
            return
        blocks: list[ContentBlock] = []
        text = msg.get("content")
        if isinstance(text, str) and text:
            blocks.append(TextBlock(text=text))
        calls = msg.get("tool_calls") or [
            {
                "id": tcm.get("tool_call_id"),
                "function": {"name": tcm.get("function_name"), "arguments": "{}"},
            }
        ]
        nid = self.b.node_id(f"resp:{rid}")
        for j, tc in enumerate(calls):
            fn = tc.get("function") if isinstance(tc, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            cid = str(tc.get("id") or f"{rid}_{j}") if isinstance(tc, dict) else f"{rid}_{j}"
            args, _ = tool_arguments(fn.get("arguments"))
            blocks.append(ToolUseBlock(id=cid, name=str(fn.get("name", "")), input=args))
            self.calls[cid] = (nid, str(fn.get("name", "")), args)
        meta: dict[str, Any] = {
            "openhands": {k: v for k, v in ev.items() if k != "tool_call_metadata"},
            "model_response_id": rid,
        }
        if isinstance(resp.get("usage"), dict):
            meta["usage"] = resp["usage"]
        self.last = self.b.add(
            "assistant",
            blocks,
            pos=i,
            local=f"resp:{rid}",
            name=str(resp.get("model", "")),
            predecessor=self.last,
            metadata=meta,
            created_at=self.time(i, ev),
            **self.where(i),
        )
        self.responses[rid] = self.last

    def observation(self, i: int, ev: dict[str, Any], tcm: dict[str, Any]) -> None:
        cid = str(tcm.get("tool_call_id"))
        call = self.calls.get(cid)
        if call is None:
            raise fail(
                self.path,
                self.line,
                f"observation for tool call {cid!r} has no action before it",
                "the event list is incomplete; import the full trajectory",
                at=f"{self.base}[{i}]",
            )
        caller, name, args = call
        content = ev.get("content", "")
        self.b.add(
            "tool",
            content if isinstance(content, str) else json.dumps(content),
            pos=i,
            name=str(tcm.get("function_name") or name),
            input=args,
            caller=caller,
            metadata={
                "tool_use_id": cid,
                "is_error": ev.get("success") is False,
                "openhands": {
                    k: v for k, v in ev.items() if k not in ("tool_call_metadata", "content")
                },
            },
            created_at=self.time(i, ev),
            **self.where(i),
        )

    def run(self) -> ImportedSession:
        for i, ev in enumerate(self.events):
            if not isinstance(ev, dict):
                raise fail(
                    self.path,
                    self.line,
                    "an event that is not an object",
                    "each event is an object with 'action' or 'observation'",
                    at=f"{self.base}[{i}]",
                )
            tcm = ev.get("tool_call_metadata")
            action, source = ev.get("action"), ev.get("source")
            raw_args = ev.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            if action == "message" and source in ("user", "agent") and not tcm:
                text = str(args.get("content", ev.get("message", "")))
                images = [
                    _image_from_url(u, self.path, f"{self.base}[{i}].args.image_urls[{k}]")
                    for k, u in enumerate(args.get("image_urls") or [])
                ]
                output: Any = [TextBlock(text=text), *images] if images else text
                self.conversation("user" if source == "user" else "assistant", output, i, ev)
            elif action == "system" and not tcm:
                tools = args.get("tools")
                if isinstance(tools, list) and "tools" not in self.b.metadata:
                    # Kept once, in the session metadata, not again in the node's.
                    self.b.metadata["tools"] = tools
                    ev = {**ev, "args": {k: v for k, v in args.items() if k != "tools"}}
                self.conversation("system", "", i, ev, input=str(args.get("content", "")))
            elif action is not None and isinstance(tcm, dict):
                self.tool_action(i, ev, tcm)
            elif ev.get("observation") is not None and isinstance(tcm, dict):
                self.observation(i, ev, tcm)
            elif action is None and ev.get("observation") is None:
                raise fail(
                    self.path,
                    self.line,
                    "an event that is neither action nor observation",
                    "pass an OpenHands event list",
                    at=f"{self.base}[{i}]",
                )
            else:
                self.kept.append(ev)
        self.b.head = self.last
        if self.kept:
            self.b.metadata["events"] = self.kept
        return self.b.build()


def _events(data: Any) -> list[Any] | None:
    # The event list itself, or a saved conversation that wraps it under "events".
    if isinstance(data, dict) and isinstance(data.get("events"), list):
        return data["events"]
    return data if isinstance(data, list) else None


def _history(path: str, no: int, history: Any) -> list[Any]:
    """An instance's events: a list of events, or of ``[action, observation]`` pairs
    (the older output format; an empty half is no event)."""
    if not isinstance(history, list):
        raise fail(
            path,
            no,
            f"the instance's 'history' is {type(history).__name__}, not a list of events",
            "pass an OpenHands output.jsonl",
        )
    if history and all(isinstance(h, list) and len(h) == 2 for h in history):
        return [ev for pair in history for ev in pair if ev]
    return history


def _configured_model(instance: dict[str, Any]) -> str:
    meta = instance.get("metadata")
    llm = meta.get("llm_config") if isinstance(meta, dict) else None
    model = llm.get("model") if isinstance(llm, dict) else None
    return model if isinstance(model, str) else ""


def _is_output(head: bytes) -> bool:
    """Whether a file starts like evaluation output: a first line that is an object
    whose first key is ``instance_id`` (its events may run past the head)."""
    return _OUTPUT_LINE.match(head) is not None


class OpenHandsImporter(JsonImporter):
    """OpenHands trajectories (event lists) and evaluation output (``output.jsonl``)."""

    name = "openhands"
    description = "OpenHands event list, or evaluation output.jsonl (one instance per line)"

    def detect(self, path: str, head: bytes) -> bool:
        """Evaluation output (see ``_is_output``), or a JSON event list."""
        return _is_output(head) or super().detect(path, head)

    def claims(self, data: Any) -> bool:
        """A list whose first events have ``source`` and ``action`` or ``observation``."""
        events = _events(data)
        return bool(events) and all(
            isinstance(e, dict) and "source" in e and ("action" in e or "observation" in e)
            for e in (events or [])[:5]
        )

    def parse(self, path: str) -> list[ImportedSession]:
        """Evaluation output one line at a time, else the JSON document."""
        head = read_bytes(path, 4096)
        if _is_output(head):
            return self.output(path)
        return super().parse(path)

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """One session from the event list."""
        events = _events(data)
        if events is None:
            raise fail(path, None, "expected a list of events", "pass an OpenHands trajectory")
        base = "events" if isinstance(data, dict) else ""
        return [_Parser(path, events, key, base).run()]

    def output(self, path: str) -> list[ImportedSession]:
        """One session per instance of an evaluation ``output.jsonl``."""
        out = []
        with open_jsonl(path) as reader:
            for no, instance in reader.values():
                if not isinstance(instance, dict) or "instance_id" not in instance:
                    raise fail(
                        path,
                        no,
                        "a line that is not an evaluation instance (no 'instance_id')",
                        "pass an OpenHands output.jsonl",
                    )
                name = str(instance["instance_id"])
                if not instance.get("history"):
                    warnings.warn(
                        f"{path}:{no}: instance {name!r} has no history (error: "
                        f"{str(instance.get('error'))[:200]}): skipped",
                        TranscriptWarning,
                        stacklevel=2,
                    )
                    continue
                events = _history(path, no, instance["history"])
                key = f"{self.name}:{reader.digest(*reader.span)[:32]}"
                p = _Parser(path, events, key, "history", line=no)
                p.b.metadata.update(
                    instance_id=instance["instance_id"],
                    title=name,
                    evaluation={k: v for k, v in instance.items() if k != "history"},
                )
                session = p.run()
                if "model" not in session.metadata and _configured_model(instance):
                    session.metadata["model"] = _configured_model(instance)
                out.append(session)
        if not out:
            raise fail(
                path,
                None,
                "no instance with a history",
                "pass the output.jsonl of a run whose instances ran",
            )
        return out
