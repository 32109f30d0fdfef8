"""Recorded HTTP cassettes (VCR YAML): the request a client sent, as a session.

Each interaction holds a request body (Anthropic Messages, Chat Completions or Gemini
``generateContent``) and the response.  The ``cassette`` importer takes the last
request — in an agent loop it carries the whole conversation — and ``cassette-all``
takes every request, one session each.  The session holds exactly the request's
messages; everything else of the request (model, tools, system blocks, parameters) is
in metadata ``request``, and the recorded response (with its usage) in ``response``,
so a renderer can compare what it produces with what was really sent; the response's
usage is also the session's ``usage`` (the provider's measurement at HEAD).  The
request's defaults are also in the keys every importer uses (``_defaults``):
``system``, ``tools``, ``model``, ``provider`` (the wire: ``anthropic``,
``openai-chat`` or ``gemini``) and ``params`` (``max_tokens``, ``tool_choice``,
``generationConfig``, …).
"""

from __future__ import annotations

import json
from typing import Any

from ._common import (
    ImportedSession,
    SessionBuilder,
    decode_text,
    fail,
    file_key,
    read_bytes,
)
from ._defaults import WIRE_PROVIDERS, request_defaults
from ._json import loads_strict
from ._messages import anthropic_messages, gemini_contents, openai_messages
from ._yaml import load_yaml
from .openai_chat import anthropic_features

__all__ = ["CassetteImporter"]


def _body(path: str, part: Any, at: str) -> Any:
    """The JSON body of a recorded request or response (``at`` names the part), or
    ``None`` when it has none (a streamed or binary body)."""
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("parsed_body"), (dict, list)):
        return part["parsed_body"]
    body = part.get("body")
    if isinstance(body, dict):
        body = body.get("string")
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip():
        try:
            return loads_strict(body)
        except json.JSONDecodeError:
            return None
        except RecursionError:
            why = "its JSON nests deeper than Python can read"
        except ValueError as exc:  # an integer past Python's digit limit, NaN, inf
            why = str(exc)
        raise fail(
            path,
            None,
            f"the recorded body cannot be read: {why}",
            "fix or remove that interaction",
            at=f"{at}.body",
        )
    return None


def _kind(uri: str, body: dict[str, Any]) -> str:
    if isinstance(body.get("contents"), list):
        return "gemini"
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return ""
    if "anthropic" in uri or "system" in body or anthropic_features(msgs):
        return "anthropic"
    return "openai"


class CassetteImporter:
    """VCR cassettes of provider calls; ``which`` is ``"last"`` or ``"all"`` requests."""

    auto: bool
    description: str

    def __init__(self, which: str = "last"):
        self.which = which
        self.name = "cassette" if which == "last" else "cassette-all"
        self.auto = which == "last"
        self.description = (
            "VCR YAML cassette: the last recorded request's conversation"
            if which == "last"
            else "VCR YAML cassette: every recorded request, one session each"
        )

    def detect(self, path: str, head: bytes) -> bool:
        """YAML whose top level has ``interactions``."""
        return any(line.startswith(b"interactions:") for line in head.splitlines()[:50])

    def parse(self, path: str) -> list[ImportedSession]:
        """The last (or every) request with a conversation body."""
        data = read_bytes(path)
        doc = load_yaml(path, decode_text(path, data))
        inter = doc.get("interactions") if isinstance(doc, dict) else None
        if not isinstance(inter, list):
            raise fail(path, None, "no 'interactions' list", "pass a VCR cassette")
        picked = []
        for i, it in enumerate(inter):
            req = it.get("request") if isinstance(it, dict) else None
            body = _body(path, req, f"interactions[{i}].request")
            uri = str(req.get("uri", "")) if isinstance(req, dict) else ""
            if isinstance(body, dict) and _kind(uri, body):
                response = _body(path, it.get("response"), f"interactions[{i}].response")
                picked.append((i, uri, body, response))
        if not picked:
            raise fail(
                path,
                None,
                "no request with messages or contents",
                "the cassette records no conversation request",
            )
        if self.which == "last":
            picked = picked[-1:]
        key = f"cassette:{file_key(data)}"
        out = []
        for i, uri, body, response in picked:
            b = SessionBuilder(f"{key}#{i}", path, self.name)
            kind = _kind(uri, body)
            model = str(body.get("model", ""))
            if kind == "gemini":  # the model is in the URL
                model = uri.rsplit("/", 1)[-1].split(":")[0]
            # Where the messages are, for error messages: a YAML mapping, or JSON text
            # inside the request's ``body`` (whose line is then the closest one known).
            req = inter[i]["request"]
            at = f"interactions[{i}].request."
            at += "parsed_body" if isinstance(req.get("parsed_body"), (dict, list)) else "body"
            if kind == "anthropic":
                anthropic_messages(
                    b,
                    body.get("system"),
                    body["messages"],
                    path=path,
                    at=f"{at}.messages",
                    model=model,
                )
            elif kind == "openai":
                openai_messages(b, body["messages"], path=path, at=f"{at}.messages", model=model)
            else:
                gemini_contents(
                    b,
                    body.get("systemInstruction"),
                    body["contents"],
                    path=path,
                    at=f"{at}.contents",
                    model=model,
                )
            b.metadata = {
                **request_defaults(body, WIRE_PROVIDERS[kind], model=model),
                "interaction": i,
                "uri": uri,
                "wire": kind,
                "request": {k: v for k, v in body.items() if k not in ("messages", "contents")},
            }
            if response is not None:
                b.metadata["response"] = response
                usage = response.get("usage") or response.get("usageMetadata")
                if usage is not None:
                    # What the provider billed for exactly this request: the measured
                    # basis for the session at its HEAD.
                    b.metadata["usage"] = usage
            out.append(b.build())
        return out
