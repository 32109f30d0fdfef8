"""Provider traffic as a history graph: each request and its answer, grouped into
sessions the way a live agent's calls relate (what ``ctxrules proxy`` records, and
what ``ctxrules import --format traffic`` makes of a cassette: one implementation).

An ``Exchange`` is one call of a wire (``anthropic``, ``openai-chat``,
``openai-responses``, ``gemini``): the request body, the response as read by
``_streams.read_response`` (streamed or not, compressed or not), the status and the
session header.  ``TrafficGraph.plan`` turns it into the nodes it adds:

* the request's conversation is read by the importers' own converters
  (``_messages``), with the answer appended as the next assistant message, so an
  answer and the same message sent back in the next request are one node;
* node ids are content addresses: a hash of the session, the node's parent and its
  content (role, text and blocks without ``cache_control``, reasoning blocks or empty
  text, tool input, tool call id).  A request that extends an earlier one finds its
  prefix stored and adds only what is new; one that diverges (a retry, an edited
  message, a rewind) shares the prefix up to the divergence and branches there —
  never a copy;
* the session is the one named by a session header (``SESSION_HEADERS``: Claude
  Code's ``x-claude-code-session-id``, …) when the request has one; an OpenAI
  Responses request naming a ``previous_response_id`` is read as that answer's
  conversation followed by its new input — the answer recorded earlier by this graph,
  or by an earlier run (``Step.response`` is what a store keeps so that a restarted
  proxy still knows it: the answer's own input and output and the id it continued);
  a ``previous_response_id`` known nowhere is said in ``Step.warning`` and in the
  answer's metadata (``continues_unknown``), never passed over in silence; otherwise
  the session is keyed by the wire and the request's opening (its system prompt and
  first user message), so requests of one conversation meet in one session;
* the answer node carries the vendor's ``usage``, the answer's ``model``,
  ``stop_reason``, ``response_id`` and the request's ``params``.  A failed request
  (an error status, an ``error`` event after a 200, a stream cut short) adds its
  request's nodes and no answer; ``Step.error`` says what failed.

Nothing of the request's headers is stored but ``KEPT_HEADERS`` (versions, betas, the
client's name): never a credential.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..errors import CtxrulesError, ImportFormatError
from ..model import Node
from ..providers import get_provider
from ._common import (
    ImportedSession,
    SessionBuilder,
    fail,
    session_id_for,
)
from ._defaults import request_defaults
from ._http import HttpExchange, is_recording, read_exchanges
from ._messages import anthropic_messages, gemini_contents, openai_messages, responses_items
from ._streams import ResponseRead, decode_body, read_response

__all__ = [
    "FORMAT",
    "KEPT_HEADERS",
    "SESSION_HEADERS",
    "Exchange",
    "ResponseLink",
    "Step",
    "TrafficGraph",
    "TrafficImporter",
    "cassette_exchanges",
    "exchange_of",
    "gemini_model",
    "recorded_exchange",
    "wire_of",
]

#: Request headers that name the agent's session (the first one present wins).
SESSION_HEADERS = (
    "x-claude-code-session-id",
    "x-session-id",
    "session_id",
    "session-id",
    "x-conversation-id",
    "conversation_id",
)
#: The only request headers recorded: never an API key, a token or a cookie.
KEPT_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "user-agent")
#: How many Responses answers a graph remembers for ``previous_response_id``.
RESPONSES_KEPT = 1024
#: The most stored links followed back from one ``previous_response_id``.
RESPONSES_CHAIN_MAX = 100_000
#: What a session made from traffic has as its format.
FORMAT = "traffic"


def wire_of(path: str) -> str | None:
    """The wire a request path belongs to (``None``: not a conversation call)."""
    p = path.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    if p.endswith("/messages"):
        return "anthropic"
    if p.endswith("/chat/completions"):
        return "openai-chat"
    if p.endswith("/responses"):
        return "openai-responses"
    if p.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    return None


class Exchange(msgspec.Struct, kw_only=True):
    """One call: ``provider`` (its wire), the URL ``path``, the ``request`` body, the
    ``response`` as read, the HTTP ``status``, the session ``group`` (a session
    header's value), the ``headers`` kept (``KEPT_HEADERS``) and when it was sent."""

    provider: str
    path: str
    request: dict[str, Any]
    response: ResponseRead = ResponseRead()
    status: int = 200
    group: str | None = None
    headers: dict[str, str] = {}
    at: float = 0.0

    @property
    def error(self) -> str | None:
        """Why the call failed (``None``: it was answered)."""
        if self.status >= 400:
            return f"HTTP {self.status}"
        if self.response.error is not None:
            return "error event"
        if self.response.body is None:
            return "unreadable response"
        if not self.response.complete:
            return "stream cut short"
        return None


def _header_map(headers: Iterable[tuple[str, str]] | Mapping[str, Any]) -> dict[str, str]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for key, value in pairs:
        if isinstance(value, list):  # a cassette's header lists
            value = value[0] if value else ""
        out.setdefault(str(key).lower(), str(value))
    return out


def exchange_of(
    path: str,
    request: bytes | Mapping[str, Any],
    request_headers: Iterable[tuple[str, str]] | Mapping[str, Any],
    status: int,
    response: bytes | Mapping[str, Any],
    response_headers: Iterable[tuple[str, str]] | Mapping[str, Any],
    *,
    at: float = 0.0,
    provider: str | None = None,
) -> Exchange | None:
    """The exchange of one HTTP call as bytes and headers; ``None`` when it is no
    conversation call (another path, a body that is not a JSON object).  A body a
    recorder kept decoded (pydantic-ai's ``parsed_body``) is given as the mapping;
    ``provider`` names the wire when the path does not (``wire_of``)."""
    provider = provider or wire_of(path)
    if provider is None:
        return None
    req_h = _header_map(request_headers)
    resp_h = _header_map(response_headers)
    if isinstance(request, Mapping):
        body: Any = dict(request)
    else:
        raw = decode_body(request, req_h.get("content-encoding", ""))
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            body = None
    if not isinstance(body, dict):
        return None
    if isinstance(response, Mapping):
        read = ResponseRead(body=dict(response), complete=True, error=response.get("error"))
    else:
        read = read_response(
            provider,
            response,
            content_type=resp_h.get("content-type", ""),
            encoding=resp_h.get("content-encoding", ""),
        )
    group = next((req_h[h] for h in SESSION_HEADERS if req_h.get(h)), None)
    return Exchange(
        provider=provider,
        path=path,
        request=body,
        response=read,
        status=status,
        group=group,
        headers={h: req_h[h] for h in KEPT_HEADERS if h in req_h},
        at=at,
    )


class ResponseLink(msgspec.Struct, kw_only=True):
    """One OpenAI Responses answer as a link of its conversation: the id it continued
    (``previous``, ``None`` at the start) and the items it added — its request's own
    input and its output.  A conversation is its links' items, oldest first."""

    id: str
    previous: str | None
    items: list[Any]


class Step(msgspec.Struct, kw_only=True):
    """What one exchange adds to the graph (``TrafficGraph.plan``).

    ``created``: the session is new (``import_key`` creates it); ``nodes``: the new
    nodes, edges pointing backwards (to stored nodes too); ``head``: where HEAD goes
    (the answer, or the request's last node when it failed); ``answer``: the answer
    node's id; ``metadata``: the session metadata this request gives (its defaults);
    ``response``: a Responses answer's link, for a store to keep (``TrafficGraph``'s
    ``responses`` reads it back); ``warning``: what was read but could not be placed
    (a ``previous_response_id`` known nowhere).
    """

    session_id: str
    import_key: str
    created: bool
    nodes: list[Node]
    head: str | None
    answer: str | None
    metadata: dict[str, Any]
    error: str | None = None
    response: ResponseLink | None = None
    warning: str | None = None


#: Blocks that do not name a message: reasoning, which clients may drop or re-encode
#: when they send an answer back (Gemini signatures come back base64url-encoded, a
#: trailing signature-only part left out; earlier turns' thinking is often stripped).
_UNNAMING = frozenset({"thinking", "redacted_thinking"})


def _strip(value: Any) -> Any:
    """A block structure for hashing: ``cache_control`` dropped, text stripped,
    reasoning blocks and empty text left out."""
    if isinstance(value, dict):
        out = {k: _strip(v) for k, v in value.items() if k != "cache_control"}
        if out.get("type") == "text" and isinstance(out.get("text"), str):
            out["text"] = out["text"].strip()
        return out
    if isinstance(value, list):
        kept = [_strip(v) for v in value]
        return [
            v
            for v in kept
            if not (
                isinstance(v, dict)
                and (
                    v.get("type") in _UNNAMING or (v.get("type") == "text" and v.get("text") == "")
                )
            )
        ]
    return value


def _canonical(node: Node) -> bytes:
    """The content that names a node: what was said, not how a request marked it."""
    output = msgspec.to_builtins(node.output)
    if isinstance(output, str):
        output = [{"type": "text", "text": output}] if output.strip() else []
    meta = node.metadata
    return msgspec.json.encode(
        [
            node.role,
            node.name if node.role == "tool" else "",
            _strip(msgspec.to_builtins(node.input)),
            _strip(output),
            meta.get("tool_use_id"),
            bool(meta.get("is_error", False)),
        ]
    )


def _digest(*parts: str | bytes) -> str:
    h = hashlib.blake2b(digest_size=12)
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\x00")
    return h.hexdigest()


def _answer_message(provider: str, body: Any) -> Any:
    """The assistant message (or Responses items) an answer body holds."""
    if not isinstance(body, dict):
        return None
    if provider == "anthropic":
        content = body.get("content")
        return {"role": "assistant", "content": content} if isinstance(content, list) else None
    if provider == "openai-chat":
        choices = body.get("choices")
        msg = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        return msg if isinstance(msg, dict) else None
    if provider == "openai-responses":
        output = body.get("output")
        return output if isinstance(output, list) else None
    cands = body.get("candidates")
    content = cands[0].get("content") if cands and isinstance(cands[0], dict) else None
    if isinstance(content, dict):
        return {"role": "model", "parts": content.get("parts") or []}
    return None


def gemini_model(path: str) -> str:
    """The model a Gemini URL names (``…/models/NAME:generateContent``), else ``""``."""
    p = path.split("?", 1)[0]
    return p.rsplit("/models/", 1)[1].split(":")[0] if "/models/" in p else ""


def _answer_metadata(ex: Exchange) -> dict[str, Any]:
    """What the answer node records: usage, model, stop reason, response id, params."""
    meta: dict[str, Any] = {"provider": ex.provider}
    try:
        parsed = get_provider(ex.provider).read_response(ex.response.body)
    except (CtxrulesError, ValueError, TypeError, KeyError, AttributeError):
        parsed = None
    if parsed is not None:
        if parsed.raw_usage is not None:
            meta["usage"] = parsed.raw_usage
        if parsed.model:
            meta["model"] = parsed.model
        if parsed.stop_reason:
            meta["stop_reason"] = parsed.stop_reason
        if parsed.id:
            meta["response_id"] = parsed.id
    params = request_defaults(ex.request, ex.provider).get("params")
    if params:
        meta["params"] = params
    return meta


class TrafficGraph:
    """Plans the nodes each exchange adds (see the module docstring).

    ``stored(session_id)`` tells which node ids a session already holds (``None``: no
    such session); it is asked once per session, then this object keeps count of what
    its plans added (call ``forget`` for a session whose write failed).
    ``responses(response_id)`` reads back a Responses answer's link that an earlier
    run stored (``Step.response``; ``None``: unknown) when this object does not
    remember it.
    """

    def __init__(
        self,
        stored: Callable[[str], Iterable[str] | None] | None = None,
        responses: Callable[[str], ResponseLink | None] | None = None,
    ):
        self._load = stored or (lambda _sid: None)
        self._load_link = responses or (lambda _rid: None)
        self._known: dict[str, set[str] | None] = {}
        # Responses answers by id: the whole conversation they ended (request items and
        # output), which a request naming it as previous_response_id continues.
        self._responses: OrderedDict[str, list[Any]] = OrderedDict()

    def forget(self, session_id: str | None = None) -> None:
        """Drop what is known of a session, or of every session (asked for again)."""
        if session_id is None:
            self._known.clear()
        else:
            self._known.pop(session_id, None)

    def _stored(self, session_id: str) -> set[str] | None:
        if session_id not in self._known:
            ids = self._load(session_id)
            self._known[session_id] = set(ids) if ids is not None else None
        return self._known[session_id]

    def plan(self, ex: Exchange) -> Step:
        """The nodes ``ex`` adds; ``ImportFormatError`` when its body cannot be read as
        a conversation of its wire."""
        error = ex.error
        answer_msg = None if error else _answer_message(ex.provider, ex.response.body)
        prior: list[Any] = []
        warning = None
        prev = ex.request.get("previous_response_id")
        if ex.provider != "openai-responses" or not isinstance(prev, str) or not prev:
            prev = None
        if prev is not None:
            if prev in self._responses:
                prior = self._responses[prev]
                self._responses.move_to_end(prev)
            else:
                stored_prior = self._chain(prev)
                if stored_prior is None:
                    warning = (
                        f"previous_response_id {prev!r} was not recorded: the "
                        "conversation is read from this request's input alone"
                    )
                else:
                    prior = stored_prior
        b, count, items = _conversation(ex, answer_msg, prior)
        built = b.build()
        answer_local = _answer_node(b, count) if answer_msg is not None else None
        if ex.group:
            import_key = f"traffic:session:{ex.group}"
        else:
            import_key = f"traffic:{ex.provider}:{_opening(built.nodes)}"
        session_id = session_id_for(import_key)
        stored = self._stored(session_id)
        created = stored is None
        known: set[str] = set() if stored is None else stored
        ids: dict[str, str] = {}
        new: list[Node] = []
        answer_meta = _answer_metadata(ex) if answer_local is not None else {}
        if warning is not None and answer_meta:
            answer_meta["continues_unknown"] = prev
        for node in built.nodes:
            pred = ids[node.predecessor] if node.predecessor else None
            caller = ids[node.caller] if node.caller else None
            nid = "n_" + _digest(session_id, pred or "", caller or "", _canonical(node))
            ids[node.id] = nid
            if nid in known:
                continue
            meta = node.metadata
            if node.id == answer_local:
                meta = {**meta, **answer_meta}
            new.append(
                msgspec.structs.replace(
                    node,
                    id=nid,
                    predecessor=pred,
                    caller=caller,
                    created_at=ex.at,
                    name=answer_meta.get("model", node.name)
                    if node.id == answer_local
                    else node.name,
                    metadata=meta,
                )
            )
            known.add(nid)
        self._known[session_id] = known
        head = ids.get(built.head) if built.head else None
        answer = ids.get(answer_local) if answer_local else None
        rid = answer_meta.get("response_id")
        link = None
        if answer is not None and isinstance(rid, str) and ex.provider == "openai-responses":
            self._remember(rid, items)
            # what a store keeps: the items this request added, after its prior ones
            link = ResponseLink(id=rid, previous=prev, items=items[len(prior) :])
        defaults = request_defaults(ex.request, ex.provider, model=gemini_model(ex.path))
        defaults.pop("params", None)  # a request's own: on its answer node
        if ex.headers:
            defaults["headers"] = dict(ex.headers)
        return Step(
            session_id=session_id,
            import_key=import_key,
            created=created,
            nodes=new,
            head=head,
            answer=answer,
            metadata=defaults,
            error=error,
            response=link,
            warning=warning,
        )

    def _remember(self, rid: str, items: list[Any]) -> None:
        self._responses[rid] = items
        self._responses.move_to_end(rid)
        while len(self._responses) > RESPONSES_KEPT:
            self._responses.popitem(last=False)

    def _chain(self, rid: str) -> list[Any] | None:
        """A Responses answer's whole conversation from the stored links (``None``: the
        answer, or a link before it, is unknown); remembered once read."""
        links: list[ResponseLink] = []
        seen: set[str] = set()
        at: str | None = rid
        base: list[Any] = []
        while at is not None:
            if at in self._responses:
                base = self._responses[at]
                break
            if at in seen or len(seen) >= RESPONSES_CHAIN_MAX:
                return None  # a loop, or a chain longer than any conversation
            seen.add(at)
            link = self._load_link(at)
            if link is None:
                return None
            links.append(link)
            at = link.previous
        items = list(base)
        for link in reversed(links):
            items.extend(link.items)
        self._remember(rid, items)
        return items


def _conversation(
    ex: Exchange, answer: Any, prior: list[Any]
) -> tuple[SessionBuilder, int, list[Any]]:
    """The request's conversation (and the answer after it) in a builder; returns it,
    the number of request messages (the answer's index) and, for Responses, the whole
    item list (``prior``: the conversation of the ``previous_response_id``)."""
    b = SessionBuilder("traffic", ex.path, FORMAT)
    body = ex.request
    model = str(body.get("model") or gemini_model(ex.path))
    where = f"request {ex.path}"
    if ex.provider == "anthropic":
        msgs = body.get("messages")
        count = len(msgs) if isinstance(msgs, list) else 0
        full = [*msgs, answer] if isinstance(msgs, list) and answer is not None else msgs
        anthropic_messages(b, body.get("system"), full, path=where, at="messages", model=model)
    elif ex.provider == "openai-chat":
        msgs = body.get("messages")
        count = len(msgs) if isinstance(msgs, list) else 0
        full = [*msgs, answer] if isinstance(msgs, list) and answer is not None else msgs
        openai_messages(b, full, path=where, at="messages", model=model)
    elif ex.provider == "openai-responses":
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if isinstance(items, list):
            items = [*prior, *items]
        count = len(items) if isinstance(items, list) else 0
        full = [*items, *answer] if isinstance(items, list) and answer is not None else items
        responses_items(b, body.get("instructions"), full, path=where, at="input", model=model)
        return b, count, full if isinstance(full, list) else []
    else:
        contents = body.get("contents")
        count = len(contents) if isinstance(contents, list) else 0
        full = (
            [*contents, answer] if isinstance(contents, list) and answer is not None else contents
        )
        system = body.get("systemInstruction", body.get("system_instruction"))
        gemini_contents(b, system, full, path=where, at="contents", model=model)
    return b, count, []


def _answer_node(b: SessionBuilder, count: int) -> str | None:
    """The builder's node for the appended answer: the assistant at index ``count``."""
    for nid, rec in b.records.items():
        f = rec.fields
        if f["role"] == "assistant" and f["metadata"].get("index") == count:
            return nid
    return None


def _opening(nodes: Sequence[Node]) -> str:
    """A conversation's opening, hashed: its first node and its first user message
    (requests of one conversation share it)."""
    conv = [n for n in nodes if n.caller is None]
    first_user = next((n for n in conv if n.role == "user"), None)
    parts = [_canonical(n) for n in (conv[:1] + ([first_user] if first_user else []))]
    return _digest(*parts)


# -- cassettes read as traffic -------------------------------------------------------


def recorded_exchange(rec: HttpExchange, provider: str | None = None) -> Exchange | None:
    """``exchange_of`` of one exchange a recording holds (``_http.HttpExchange``)."""
    return exchange_of(
        rec.path,
        rec.request_as_read(),
        rec.request_headers,
        rec.status if rec.status is not None else 200,
        rec.response_as_read(),
        rec.response_headers,
        provider=provider,
    )


def cassette_exchanges(path: str) -> list[tuple[int, Exchange]]:
    """The conversation calls a recording holds (vcrpy, Ruby VCR or httprr: see
    ``_http.read_exchanges``), with their exchange index."""
    out: list[tuple[int, Exchange]] = []
    for rec in read_exchanges(path)[1]:
        ex = recorded_exchange(rec)
        if ex is not None:
            out.append((rec.index, ex))
    return out


class TrafficImporter:
    """A VCR cassette read as live traffic: every call, grouped into sessions, each
    answer a node — the graph ``ctxrules proxy`` records for the same calls."""

    name = "traffic"
    description = "VCR cassette as live traffic: calls grouped into sessions, answers as nodes"
    auto = False

    def detect(self, path: str, head: bytes) -> bool:
        """A recording of HTTP traffic (``_http.is_recording``)."""
        return is_recording(head)

    def parse(self, path: str) -> list[ImportedSession]:
        """One session per conversation the calls hold."""
        graph = TrafficGraph()
        sessions: dict[str, ImportedSession] = {}
        for i, ex in cassette_exchanges(path):
            try:
                step = graph.plan(ex)
            except ImportFormatError as exc:
                raise fail(
                    path,
                    None,
                    exc.message,
                    "fix or remove that interaction",
                    at=f"interactions[{i}]",
                ) from None
            s = sessions.get(step.session_id)
            if s is None:
                s = sessions[step.session_id] = ImportedSession(
                    key=step.import_key or step.session_id,
                    source=path,
                    format=FORMAT,
                    nodes=[],
                    head=None,
                    id_seed=step.import_key or step.session_id,
                )
            s.nodes.extend(step.nodes)
            s.head = step.head
            s.metadata = {**s.metadata, **step.metadata}
        if not sessions:
            raise fail(
                path,
                None,
                "no conversation call (Anthropic messages, Chat Completions, Responses "
                "or Gemini generateContent)",
                "the cassette records no conversation request",
            )
        return list(sessions.values())
