"""What an exception says about a vendor's refusal: its HTTP status and error body.

Each SDK keeps them in its own place, and an agent framework may wrap the SDK's error
in its own (the original then is its ``__cause__``):

* anthropic: ``status_code`` and ``body``, the whole envelope
  ``{"type": "error", "error": {...}}`` (a mid-stream error event: status 200);
* openai (Chat and Responses): ``status_code`` and ``body``, the *inner* error object
  ``{"message", "type", "param", "code"}``;
* google-genai: ``code`` (the HTTP status) and ``details``, the whole response JSON
  (``message`` and ``status`` beside them);
* frameworks on top (pydantic-ai's ``ModelHTTPError``, LiteLLM's errors): ``status_code``
  and ``body`` or ``message``;
* raw HTTP: an ``httpx`` / ``httpx2`` ``HTTPStatusError`` or a ``requests``
  ``HTTPError`` (``response.status_code`` and its JSON), a ``urllib`` ``HTTPError``
  (``code`` and the body read from it);
* ctxrules' own ``VendorError`` (an error body or error event ``record`` was given).

``error_parts(exc)`` finds the status and the body in the vendor's envelope
``{"error": {...}}``, which every provider's ``prompt_too_long`` reads;
``prompt_too_long_of(exc, provider)`` asks the provider — then the other built-in
providers, since a proxy or a compatible server may answer in another vendor's
dialect — whether the refusal is a prompt-too-long one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import PromptTooLongError, VendorError
from ..plugins import registry
from .base import PromptTooLong

__all__ = ["error_parts", "prompt_too_long_of"]

#: How far down a chain of wrapped exceptions (``__cause__`` / ``__context__``) to look.
MAX_CHAIN = 6


def _json(value: Any) -> Any:
    if isinstance(value, (bytes, str)):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError, ValueError, UnicodeDecodeError):
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return value


def _envelope(body: Any, message: str) -> dict[str, Any]:
    """``body`` in the vendor envelope ``{"error": {...}}`` (an inner error object is
    wrapped, text becomes its message, nothing at all becomes ``message``)."""
    body = _json(body)
    if isinstance(body, Mapping):
        if isinstance(body.get("error"), Mapping):
            return {"error": dict(body["error"])}
        if isinstance(body.get("error"), str):
            return {"error": {"message": body["error"]}}
        if any(k in body for k in ("message", "code", "type", "status")):
            return {"error": dict(body)}
    if isinstance(body, str) and body.strip():
        return {"error": {"message": body}}
    return {"error": {"message": message}}


def _response_parts(response: Any, message: str) -> tuple[int | None, dict[str, Any]] | None:
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return None
    try:
        body: Any = response.json()
    except Exception:  # not JSON, or a streamed body not read: its text then
        try:
            body = response.text
        except Exception:
            body = None
    return status, _envelope(body, message)


def _own_parts(exc: BaseException) -> tuple[int | None, dict[str, Any]] | None:
    message = str(exc)
    if isinstance(exc, VendorError):
        return exc.status, _envelope(exc.body, exc.message)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        body = getattr(exc, "body", None)
        if body is None:
            parts = _response_parts(getattr(exc, "response", None), message)
            if parts is not None:
                return parts
            body = getattr(exc, "message", None) or message
        return status, _envelope(body, message)
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None)
    if isinstance(code, int) and not isinstance(code, bool) and details is not None:
        # google-genai's APIError: the whole response JSON in ``details``.
        envelope = _envelope(details, str(getattr(exc, "message", "") or message))
        return code, envelope
    response = getattr(exc, "response", None)
    if response is not None:
        parts = _response_parts(response, message)
        if parts is not None:
            return parts
    if (
        isinstance(code, int)
        and not isinstance(code, bool)
        and callable(getattr(exc, "read", None))
    ):
        # urllib's HTTPError: the body is read once and kept for the next look.
        body = getattr(exc, "_ctxrules_body", None)
        if body is None:
            try:
                body = exc.read()  # type: ignore[attr-defined]
            except Exception:
                body = b""
            try:
                exc._ctxrules_body = body  # type: ignore[attr-defined]
            except AttributeError:
                pass
        return code, _envelope(body, message)
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < MAX_CHAIN and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def error_parts(exc: BaseException) -> tuple[int | None, dict[str, Any]] | None:
    """The HTTP status (``None``: not known) and the error body in the vendor envelope
    ``{"error": {...}}`` of the first exception in ``exc``'s chain that carries them
    (see the module docstring); ``None`` when none does."""
    for e in _chain(exc):
        parts = _own_parts(e)
        if parts is not None:
            return parts
    return None


def prompt_too_long_of(exc: BaseException, provider: Any = None) -> PromptTooLongError | None:
    """The prompt-too-long refusal ``exc`` is (or wraps), else ``None``: a
    ``PromptTooLongError`` itself, an error a provider recognises from its status and
    body (``provider`` first — a ``Provider`` or a name — then every other registered
    provider), or LiteLLM's ``ContextWindowExceededError``."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, PromptTooLongError):
            return e
    parts = error_parts(exc)
    if parts is not None:
        status, envelope = parts
        providers = registry("providers")
        first = providers.get(provider) if isinstance(provider, str) else provider
        names = [n for n in providers.names() if first is None or n != first.name]
        for prov in [first, *(providers.get(n) for n in names)]:
            if prov is None:
                continue
            found = prov.prompt_too_long(status, envelope)
            if found is not None:
                return found
    for e in chain:
        if type(e).__name__ == "ContextWindowExceededError":
            return PromptTooLong(f"context window exceeded: {e}")
    return None
