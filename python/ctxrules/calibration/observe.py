"""Recorded requests with the prompt size their vendor billed: what estimates are
measured and fitted on.

``read_observations(paths)`` reads every conversation call a recording holds — a VCR
cassette (Python vcrpy or Ruby VCR YAML) or a Go ``httprr`` trace — whose response
carries usage, as an ``Observation``: the request body exactly as it was sent, its
wire and model, and the billed prompt (input + cache reads + cache writes).  The body
is estimated as recorded, so a figure measures the estimator and nothing else.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ImportFormatError, ProviderError
from ..importers.traffic import Exchange, cassette_exchanges, exchange_of, gemini_model
from ..providers import get_provider, model_in_family, resolve_model
from ..providers.estimate import PromptEstimate
from ..providers.gemini import gemini_call_profile
from ..providers.models import ModelProfile
from ..providers.usage import Usage

__all__ = [
    "OPEN_WEIGHT",
    "Observation",
    "estimate_observation",
    "httprr_exchanges",
    "own_model",
    "read_observations",
    "sources_of",
]

#: The provider family of each wire's own models (``model_in_family``).
FAMILY = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "gemini",
}
#: Models named like a vendor's own whose weights are public and which that vendor's API
#: does not serve (OpenAI's gpt-oss): a recorded bill of theirs is the serving server's
#: (Ollama, OpenRouter, …), with its own chat template, so they are not ``own_model``.
OPEN_WEIGHT = ("gpt-oss*",)


def own_model(model: str, wire: str) -> bool:
    """Whether ``model`` is one of the ``wire`` vendor's own, served by that vendor."""
    if any(fnmatch.fnmatchcase(model, p) for p in OPEN_WEIGHT):
        return False
    return model_in_family(model, FAMILY[wire]) is True


class Observation(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded request: where it is (``source``, ``index`` of the call in it), its
    ``wire`` and ``model``, the ``body`` as sent, the ``usage`` its response reported
    and ``billed`` (``usage.prompt_tokens``).  ``own_model``: the model is one of the
    wire vendor's own (an OpenAI-compatible server's model sent over the Chat wire is
    not).  ``streamed``: whether the call was streamed (Gemini: sent to
    ``streamGenerateContent``; the others: the body's ``stream``), which decides what
    Gemini 2.5 Flash bills (``gemini_call_profile``)."""

    source: str
    index: int
    wire: str
    model: str
    body: dict[str, Any]
    usage: Usage
    own_model: bool
    streamed: bool = False

    @property
    def billed(self) -> int:
        """The billed prompt: input + cache reads + cache writes."""
        return self.usage.prompt_tokens

    @property
    def spec(self) -> str:
        """``"wire:model"`` as ``resolve_model`` takes it."""
        return f"{self.wire}:{self.model}"


def _http_message(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    """Start line, headers and body of one HTTP/1.x message as a trace stores it."""
    sep = raw.find(b"\r\n\r\n")
    cut = 4
    if sep < 0:
        sep, cut = raw.find(b"\n\n"), 2
    if sep < 0:
        sep, cut = len(raw), 0
    head = raw[:sep].decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    headers: dict[str, str] = {}
    for line in head[1:]:
        key, _, value = line.partition(":")
        if key:
            headers.setdefault(key.strip().lower(), value.strip())
    body = raw[sep + cut :]
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    return head[0] if head else "", headers, body


def _dechunk(data: bytes) -> bytes:
    out, i = bytearray(), 0
    while i < len(data):
        end = data.find(b"\r\n", i)
        if end < 0:
            break
        try:
            size = int(data[i:end].split(b";")[0], 16)
        except ValueError:
            return bytes(data)
        if size == 0:
            break
        out += data[end + 2 : end + 2 + size]
        i = end + 2 + size + 2
    return bytes(out)


def httprr_exchanges(path: str) -> list[tuple[int, Exchange]]:
    """The conversation calls of a Go ``httprr`` trace (``httprr trace v1``: per call a
    line ``REQLEN RESPLEN`` then the raw request and response)."""
    data = Path(path).read_bytes()
    header = b"httprr trace v1\n"
    if not data.startswith(header):
        raise ImportFormatError(
            "not an httprr trace", where=path, hint="its first line must be 'httprr trace v1'"
        )
    i, n, out = len(header), 0, []
    while i < len(data):
        end = data.find(b"\n", i)
        if end < 0:
            break
        try:
            req_len, resp_len = (int(x) for x in data[i:end].split())
        except ValueError:
            raise ImportFormatError(
                "a record does not start with 'REQLEN RESPLEN'",
                where=f"{path} (byte {i})",
                hint="the trace is damaged",
            ) from None
        req = data[end + 1 : end + 1 + req_len]
        resp = data[end + 1 + req_len : end + 1 + req_len + resp_len]
        i = end + 1 + req_len + resp_len
        start, req_h, req_body = _http_message(req)
        status_line, resp_h, resp_body = _http_message(resp)
        parts = start.split(" ")
        url = parts[1] if len(parts) > 1 else ""
        url_path = "/" + url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url
        try:
            status = int(status_line.split(" ")[1])
        except (IndexError, ValueError):
            status = 200
        ex = exchange_of(url_path, req_body, req_h, status, resp_body, resp_h)
        if ex is not None:
            out.append((n, ex))
        n += 1
    return out


def _model(ex: Exchange) -> str:
    model = ex.request.get("model")
    if not isinstance(model, str) or not model:
        model = gemini_model(ex.path)
    return model.removeprefix("models/")


def _streamed(ex: Exchange) -> bool:
    if ex.provider == "gemini":
        return ex.path.split("?", 1)[0].rstrip("/").endswith(":streamGenerateContent")
    return ex.request.get("stream") is True


def _exchanges(path: str) -> list[tuple[int, Exchange]]:
    with open(path, "rb") as f:
        head = f.read(32)
    if head.startswith(b"httprr trace"):
        return httprr_exchanges(path)
    return cassette_exchanges(path)


def read_observations(
    paths: Iterable[str | Path], *, skipped: list[tuple[str, str]] | None = None
) -> list[Observation]:
    """Every call of the recordings at ``paths`` (cassettes, httprr traces) that was
    answered with usage, in file order.  A file that cannot be read is an
    ``ImportFormatError``, or, given a ``skipped`` list, noted there (path, why)."""
    out = []
    for p in paths:
        path = str(p)
        try:
            exchanges = _exchanges(path)
        except ImportFormatError as exc:
            if skipped is None:
                raise
            skipped.append((path, exc.message))
            continue
        for index, ex in exchanges:
            if ex.error is not None or not isinstance(ex.response.body, dict):
                continue
            try:
                usage = get_provider(ex.provider).parse_usage(ex.response.body)
            except ProviderError:
                usage = None
            model = _model(ex)
            if usage is None or usage.prompt_tokens <= 0 or not model:
                continue
            out.append(
                Observation(
                    source=path,
                    index=index,
                    wire=ex.provider,
                    model=model,
                    body=ex.request,
                    usage=usage,
                    own_model=own_model(model, ex.provider),
                    streamed=_streamed(ex),
                )
            )
    return out


def sources_of(observations: Sequence[Observation]) -> list[str]:
    """The distinct sources, in order."""
    return list(dict.fromkeys(o.source for o in observations))


def estimate_observation(o: Observation, profile: ModelProfile | None = None) -> PromptEstimate:
    """The estimate of a recorded request as it was sent, with its model's profile (or
    ``profile``), as the call was made (a Gemini call: streamed or not,
    ``gemini_call_profile``)."""
    profile = profile or resolve_model(o.spec)
    if o.wire == "gemini":
        profile = gemini_call_profile(profile, streamed=o.streamed)
    return get_provider(o.wire).estimate_prompt(o.body, profile)
