"""OpenHands event streams (a JSON list of action / observation events).

* a user ``message`` action → user node; an agent ``message`` → assistant node; a
  ``system`` action → system node;
* agent actions carrying ``tool_call_metadata`` → one assistant node per model response
  (``model_response.id``; a response with several tool calls gives several actions),
  with the response's text, ``tool_use`` blocks and ``usage``;
* an observation whose ``tool_call_metadata`` names one of those calls → tool node
  under that assistant node (``name`` = function, ``input`` = its arguments);
* everything else (state changes, empty observations) is kept in the session metadata
  under ``events``.
"""

from __future__ import annotations

import json
from typing import Any

from ..model import ContentBlock, TextBlock, ToolUseBlock
from ._common import ImportedSession, SessionBuilder, fail, parse_time
from ._json import JsonImporter
from ._messages import _arguments, _image_from_url

__all__ = ["OpenHandsImporter"]


def _response_message(tcm: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    resp = tcm.get("model_response") if isinstance(tcm.get("model_response"), dict) else {}
    choices = resp.get("choices") if isinstance(resp, dict) else None
    msg = choices[0].get("message") if isinstance(choices, list) and choices else None
    return resp or {}, msg if isinstance(msg, dict) else {}


class _Parser:
    def __init__(self, path: str, events: list[Any], key: str, base: str = ""):
        self.path = path
        self.events = events
        self.base = base  # the events' path in the document: "" or "events"
        self.b = SessionBuilder(key, path, "openhands")
        self.last: str | None = None
        self.responses: dict[str, str] = {}  # model_response id -> assistant node
        self.calls: dict[str, tuple[str, str, dict[str, Any]]] = {}  # call id -> node, name, args
        self.kept: list[Any] = []

    def time(self, i: int, ev: dict[str, Any]) -> float:
        return parse_time(ev.get("timestamp"), path=self.path, at=f"{self.base}[{i}].timestamp")

    def conversation(self, role: str, output: Any, i: int, ev: dict[str, Any], **kw: Any) -> None:
        self.last = self.b.add(
            role,
            output,
            pos=i,
            predecessor=self.last,
            metadata={"openhands": {k: v for k, v in ev.items() if k != "tool_call_metadata"}},
            created_at=self.time(i, ev),
            at=f"{self.base}[{i}]",
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
            args, _ = _arguments(fn.get("arguments"))
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
            at=f"{self.base}[{i}]",
        )
        self.responses[rid] = self.last

    def observation(self, i: int, ev: dict[str, Any], tcm: dict[str, Any]) -> None:
        cid = str(tcm.get("tool_call_id"))
        call = self.calls.get(cid)
        if call is None:
            raise fail(
                self.path,
                None,
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
            at=f"{self.base}[{i}]",
        )

    def run(self) -> ImportedSession:
        for i, ev in enumerate(self.events):
            if not isinstance(ev, dict):
                raise fail(
                    self.path,
                    None,
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
                    _image_from_url(u, self.path, f"[{i}].args.image_urls[{k}]")
                    for k, u in enumerate(args.get("image_urls") or [])
                ]
                output: Any = [TextBlock(text=text), *images] if images else text
                self.conversation("user" if source == "user" else "assistant", output, i, ev)
            elif action == "system" and not tcm:
                self.conversation("system", "", i, ev, input=str(args.get("content", "")))
            elif action is not None and isinstance(tcm, dict):
                self.tool_action(i, ev, tcm)
            elif ev.get("observation") is not None and isinstance(tcm, dict):
                self.observation(i, ev, tcm)
            elif action is None and ev.get("observation") is None:
                raise fail(
                    self.path,
                    None,
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


class OpenHandsImporter(JsonImporter):
    """OpenHands trajectories (event lists)."""

    name = "openhands"
    description = "OpenHands event list (actions / observations with tool_call_metadata)"

    def claims(self, data: Any) -> bool:
        """A list whose first events have ``source`` and ``action`` or ``observation``."""
        events = _events(data)
        return bool(events) and all(
            isinstance(e, dict) and "source" in e and ("action" in e or "observation" in e)
            for e in (events or [])[:5]
        )

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """One session from the event list."""
        events = _events(data)
        if events is None:
            raise fail(path, None, "expected a list of events", "pass an OpenHands trajectory")
        base = "events" if isinstance(data, dict) else ""
        return [_Parser(path, events, key, base).run()]
