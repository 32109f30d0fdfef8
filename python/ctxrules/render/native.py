"""Round-trip: what of a recorded request is kept to write it back as it was sent.

A session imported from recorded traffic (``cassette`` / ``cassette-all``) keeps the
request body exactly as recorded (session metadata ``request_body``) and, on every
node, where in it the node came from (metadata ``index``: its message, content or
input item; a Responses node also its items, ``responses_items``).  ``native_form``
turns the two into the renderer's table (``ctxrules.providers.base.NativeForm``):

* the elements of the recorded conversation list, each byte for byte;
* per node, the elements its own content came from (``el``) and, for a tool node,
  those its call came from (``call``: its caller's message), and whether those
  recorded blocks carried an Anthropic cache breakpoint;
* per element, how many node parts it holds (``members``): a node part counts when
  its item shows something on the wire (an assistant message that only calls tools
  shows nothing of its own: its calls are its tool nodes' parts);
* the recorded system field (Anthropic ``system``, Gemini ``systemInstruction`` in
  either spelling, Responses ``instructions``) and, when the request's tools are the
  recorded ones, the recorded ``tools``.

The renderer (``rust/render/native.rs``) writes a message as the recorded elements
when all of its blocks come from items no rule changed and together they are exactly
those elements' members; everything else in the canonical form.  So for the wire it
was recorded on, a request rendered with no rules (preset ``off``) is the recorded
body — the fields a client adds to read the answer (``stream``, ``stream_options``)
aside, which a render never sends (docs/sessions.md) — and with rules, only what a
rule changed differs.  The recorded cache breakpoints are the agent's own: they are
the request's breakpoints (none of ours are added) for the items that keep them.

Only the table is made here; nothing recorded is trusted to decide a role, a pairing
or an id (those come from the nodes, as for any session).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..commit.items import tool_input_text, user_text
from ..importers._defaults import WIRE_PROVIDERS
from ..importers._messages import LIST_KEYS
from ..model import (
    CompactionBlock,
    ContextCommit,
    ImageBlock,
    Node,
    TextBlock,
    ThinkingBlock,
)
from ..providers.base import NativeField, NativeForm, NativeMember
from .defaults import RenderDefaults

__all__ = [
    "SYSTEM_KEYS",
    "explain_round_trip",
    "native_form",
    "recorded_provider",
    "replays_recording",
    "with_native",
]

#: Where each wire's request holds its system prompt as a field of its own (Chat
#: Completions has none: its system messages are list elements).
SYSTEM_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("system",),
    "openai-chat": (),
    "openai-responses": ("instructions",),
    "gemini": ("systemInstruction", "system_instruction"),
}

_Body = dict[str, msgspec.Raw]


def recorded_provider(metadata: Mapping[str, Any]) -> str | None:
    """The provider a session's request was recorded for (``None``: not known)."""
    provider = metadata.get("provider") or WIRE_PROVIDERS.get(str(metadata.get("wire")))
    return provider if isinstance(provider, str) else None


def replays_recording(metadata: Mapping[str, Any], provider: str) -> bool:
    """Whether a session holds a recorded request body of ``provider``'s wire (so its
    request rendered for ``provider`` has a recorded form: ``native_form``)."""
    return isinstance(metadata.get("request_body"), str) and (
        recorded_provider(metadata) == provider
    )


def _decode(raw: Any, type: Any) -> Any:
    try:
        return msgspec.json.decode(raw, type=type)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _has_marker(blocks: Any, skip: str | None = None) -> bool:
    """Whether any block of a recorded content list (but those of type ``skip``)
    carries ``cache_control``."""
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and "cache_control" in b and b.get("type") != skip for b in blocks
    )


def _shows(node: Node, wire: str) -> bool:
    """Whether the node's own item shows anything on ``wire`` (so a recorded element
    counts it as a member): what the renderer's neutral messages and the wire's view
    keep of it (rust/render/neutral.rs, the wires' ``view``)."""
    out = node.output
    if node.role == "system":
        return True
    if isinstance(out, str):
        return out != ""
    if node.role == "user":
        return user_text(node) != "" or any(isinstance(b, ImageBlock) for b in out)
    for b in out:
        if isinstance(b, TextBlock) and b.text:
            return True
        if isinstance(b, ThinkingBlock) and b.signature:
            if (wire == "anthropic" and b.vendor == "") or (
                wire == "gemini" and b.vendor == "gemini"
            ):
                return True
        if isinstance(b, CompactionBlock) and b.effective:
            if (wire == "anthropic" and b.vendor == "") or (
                wire == "openai-responses" and b.vendor == "openai"
            ):
                return True
    return False


def _span(node: Node, offset: int = 0) -> tuple[int, int] | None:
    """The elements a node came from: its ``index``, and for a Responses node as many
    items as it was read from (``offset``: items read before the request's own)."""
    meta = node.metadata
    index = meta.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None
    items = meta.get("responses_items")
    n = len(items) if isinstance(items, list) and items else 1
    return (index - offset, index - offset + n)


def native_form(
    metadata: Mapping[str, Any], nodes: Iterable[Node], provider: str, *, tools: bool
) -> NativeForm | None:
    """The recorded form of a session's request for ``provider`` (see the module
    docstring); ``None`` when the session holds no recorded request of that wire, or
    one whose conversation is not a list of the session's own nodes alone (a
    Responses request chained on ``previous_response_id``, or whose input is a
    string).  ``tools``: the request's tools are the recorded ones (send them as
    recorded)."""
    if recorded_provider(metadata) != provider or provider not in LIST_KEYS:
        return None
    text = metadata.get("request_body")
    if not isinstance(text, str):
        return None
    body: _Body | None = _decode(text, _Body)
    if body is None:
        return None
    listed = body.get(LIST_KEYS[provider])
    raws: list[msgspec.Raw] | None = _decode(listed, list[msgspec.Raw]) if listed else None
    input_text = None
    if raws is None and provider == "openai-responses" and listed is not None:
        text = _decode(listed, str)
        if text is None:
            return None
        # Read as one user message: that is its one element.
        raws = [msgspec.Raw(msgspec.json.encode({"role": "user", "content": text}))]
        input_text = listed
    if raws is None:
        return None
    plain = [msgspec.json.decode(r) for r in raws]
    nodes = list(nodes)
    # A Responses request chained on ``previous_response_id`` is read as the chain's
    # items first: those were not sent (the id stands for them), the request's own
    # input follows them.
    offset = max((span[1] for n in nodes if (span := _span(n)) is not None), default=0)
    offset = max(0, offset - len(raws)) if provider == "openai-responses" else 0
    by_id: dict[str, Node] = {}
    members = [0] * len(raws)
    table: dict[str, NativeMember] = {}
    system: NativeField | None = None
    system_nodes = 0
    key = next((k for k in SYSTEM_KEYS[provider] if k in body), None)
    if key is not None:
        system = NativeField(key=key, value=body[key])
    for node in nodes:
        by_id[node.id] = node
        span = _span(node, offset)
        if span is not None and span[1] <= 0:
            table[node.id] = NativeMember(skip=True)
            continue
        if span is not None and span[0] < 0:
            continue  # read partly from the chain: not as recorded
        if node.role == "system" and span is None:
            if system is None:
                if offset > 0:
                    # The chain's instructions: a chained request sends its own only.
                    table[node.id] = NativeMember(skip=True)
                continue
            # A system node of no text shows nothing (the renderer drops it), like a
            # field recorded empty: not one of the field's items.
            system_nodes += node.input != ""
            bp = provider == "anthropic" and _has_marker(_decode(system.value, Any))
            table[node.id] = NativeMember(sys=True, bp=bp)
            continue
        if span is None or span[1] > len(raws):
            continue
        call = None
        call_bp = call_skip = False
        own_bp = False
        if node.role == "tool" and node.caller is not None:
            caller = by_id.get(node.caller)
            call = _span(caller, offset) if caller is not None else None
            call_skip = call is not None and call[1] <= 0
            if call is not None and call[0] < 0:
                call = None
            if call is not None and call[1] > len(raws):
                call = None
            if provider == "anthropic":
                use_id = node.metadata.get("tool_use_id")
                own_bp = "cache_control" in node.metadata
                if call is not None:
                    message = plain[call[0]]
                    content = message.get("content") if isinstance(message, dict) else None
                    call_bp = any(
                        isinstance(b, dict)
                        and b.get("type") == "tool_use"
                        and b.get("id") == use_id
                        and "cache_control" in b
                        for b in (content if isinstance(content, list) else [])
                    )
            for part in (span, call):
                if part is not None:
                    for e in range(*part):
                        members[e] += 1
        else:
            if provider == "anthropic" and isinstance(plain[span[0]], dict):
                content = plain[span[0]].get("content")
                skip = "tool_use" if node.role == "assistant" else "tool_result"
                own_bp = _has_marker(content, skip)
            if _shows(node, provider):
                for e in range(*span):
                    members[e] += 1
        args = tool_input_text(node) if node.role == "tool" else None
        table[node.id] = NativeMember(
            el=span, call=call, bp=own_bp, call_bp=call_bp, call_skip=call_skip, args=args
        )
    recorded_tools = body.get("tools") if tools else None
    tools_bp = False
    if recorded_tools is not None and provider == "anthropic":
        declared = _decode(recorded_tools, Any)
        tools_bp = isinstance(declared, list) and bool(declared) and _has_marker(declared[-1:])
    model = _decode(body["model"], Any) if "model" in body else None
    return NativeForm(
        wire=provider,
        model=model if isinstance(model, str) and model else None,
        elements=tuple(raws),
        members=tuple(members),
        system=system,
        system_nodes=system_nodes,
        tools=recorded_tools,
        tools_bp=tools_bp,
        input_text=input_text,
        nodes=table,
    )


def with_native(
    defaults: RenderDefaults, form: NativeForm, chosen: Mapping[str, Any]
) -> RenderDefaults:
    """``defaults`` of a request replaying its recording on the same wire: the recorded
    form among the options, the model as recorded (it was sent on this wire, whatever
    family it looks like: a gateway's, a compatible endpoint's), and no tools where
    the recording declared none — unless given (``chosen``: the options given)."""
    options = {**defaults.options, "native": form}
    explain = {
        **defaults.explain,
        "native": {"recorded_for": form.wire, "elements": len(form.elements)},
    }
    if form.model and "model" not in chosen:
        options["model"] = form.model
        explain["model"] = {"source": "recorded request", "recorded": form.model}
        if form.wire == "gemini":
            # Gemini names the model in the URL; a client that sent it in the body too
            # sent a field like any other.
            options["extra"] = {**options.get("extra", {}), "model": form.model}
    if form.tools is None and "tools" not in chosen and "tools" in options:
        del options["tools"]
        explain["tools"] = {"declared": 0, "inferred": [], "source": "recorded (none)"}
    return RenderDefaults(options=options, explain=explain)


def explain_round_trip(
    meta: Mapping[str, Any], form: NativeForm, commit: ContextCommit
) -> dict[str, Any]:
    """What ``--explain`` says of a replayed recording: how many recorded elements went
    out as recorded and, for each that did not, why — the nodes of that element whose
    items a rule changed (their state and the rule's reason), or left out of the
    request (summarized, or not in the commit); an element none of whose items changed
    was rewritten in the canonical form for the renderer's own reasons (a repeated
    call id made unique, a prefill trimmed)."""
    found = meta.get("round_trip")
    if not isinstance(found, Mapping):
        return {"recorded_for": form.wire, "as_recorded": False}
    items = {it.source_node_id: it for it in commit.items if it.attached_from is None}
    owners: dict[int, list[str]] = {}
    for node_id, m in form.nodes.items():
        for part in (m.el, m.call):
            if part is not None:
                for e in range(*part):
                    owners.setdefault(e, []).append(node_id)
    changes: list[dict[str, Any]] = []
    for e in found.get("rewritten", []):
        why = []
        for node_id in sorted(set(owners.get(e, []))):
            it = items.get(node_id)
            if it is None:
                why.append({"node": node_id, "change": "not in the request"})
            elif it.state != "full" or it.reason not in ("new", "anchor"):
                why.append({"node": node_id, "state": it.state, "reason": it.reason})
        changes.append(
            {"element": e, "changed": why}
            if why
            else {"element": e, "changed": [], "note": "rewritten by the renderer"}
        )
    elements = int(found.get("elements", 0))
    return {
        "recorded_for": form.wire,
        "elements": elements,
        "as_recorded": elements - len(changes),
        "system_as_recorded": bool(found.get("system_as_recorded")),
        "rewritten": changes,
    }
