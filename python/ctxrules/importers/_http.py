"""Recorded HTTP exchanges as three recorders write them, read into one shape.

* **vcrpy** (Python) YAML cassettes: ``interactions: [{request: {method, uri, body,
  headers}, response: {status: {code, message}, headers, body: {string}}}]`` (its
  httpx recordings of some versions: ``response: {status_code, headers, content}``).  A body
  is a string, the bytes of a ``!!binary`` value (a compressed body recorded as it
  came), or, in pydantic-ai's cassettes, a ``parsed_body`` mapping beside ``body``.
  Header values are lists; the case of header names varies; dd-trace-py's aiohttp
  recordings tag header names ``!!python/object/apply:multidict._multidict.istr``
  (``_yaml_loader`` reads them as the name).
* **Ruby VCR** YAML cassettes: ``http_interactions: [{request: {method, uri, body:
  {encoding, string}, headers}, response: {status: {code, message}, headers, body:
  {encoding, string}}, recorded_at}]``, ``recorded_with: VCR x``; a binary body is a
  ``!binary`` (base64) string.
* **httprr** (Go, ``golang.org/x/oscar``'s format, used by langchaingo): the line
  ``httprr trace v1``, then per exchange a line ``<request bytes> <response bytes>``
  and the raw HTTP/1.1 request and response, each its start line, headers, a blank
  line and the body.

Bodies are kept as recorded: ``HttpExchange.request_bytes`` / ``response_bytes`` give
their bytes, still in their ``Content-Encoding`` (``_streams.decode_body`` undoes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ._common import decode_text, fail, read_bytes
from ._yaml import load_yaml

__all__ = ["HTTPRR_MAGIC", "HttpExchange", "is_recording", "read_exchanges", "url_path"]

#: The first line of an httprr trace.
HTTPRR_MAGIC = b"httprr trace v1\n"


class HttpExchange(msgspec.Struct, kw_only=True):
    """One recorded request and its response.

    ``request_body`` / ``response_body`` are as recorded: ``str``, ``bytes`` (a binary
    or still-encoded body), a decoded mapping or list (pydantic-ai's ``parsed_body``)
    or ``None``.  Header names are lower case, each with its first value.  ``at``
    names the exchange in the file (``interactions[3]``, ``exchange 3``) and ``line``
    its line where the format has one (httprr).
    """

    index: int
    method: str
    uri: str
    request_headers: dict[str, str]
    request_body: Any
    status: int | None
    response_headers: dict[str, str]
    response_body: Any
    at: str
    line: int | None = None

    def request_as_read(self) -> bytes | dict[str, Any]:
        """The request body for ``traffic.exchange_of``: a decoded mapping as it is,
        else its bytes."""
        body = self.request_body
        return body if isinstance(body, dict) else self.request_bytes()

    def response_as_read(self) -> bytes | dict[str, Any]:
        """The response body for ``traffic.exchange_of``: a decoded mapping as it is,
        else its bytes."""
        body = self.response_body
        return body if isinstance(body, dict) else self.response_bytes()

    def request_bytes(self) -> bytes:
        """The request body's bytes (a decoded ``parsed_body`` as JSON)."""
        return _bytes(self.request_body)

    def response_bytes(self) -> bytes:
        """The response body's bytes (a decoded ``parsed_body`` as JSON)."""
        return _bytes(self.response_body)

    @property
    def path(self) -> str:
        """The URL's path and query (``/v1/messages``)."""
        return url_path(self.uri)


def _headers(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            first = value[0] if isinstance(value, list) and value else value
            if first is not None:
                out.setdefault(str(name).lower(), str(first))
    return out


def _vcr_body(part: Mapping[str, Any]) -> Any:
    if isinstance(part.get("parsed_body"), (dict, list)):
        return part["parsed_body"]
    # vcrpy's httpx recordings of some versions keep the response body as ``content``.
    body = part.get("body", part.get("content"))
    if isinstance(body, Mapping):  # vcrpy {string: ...}, Ruby {encoding, string}
        body = body.get("string", body.get("base64_string"))
    return body


def _status(raw: Any) -> int | None:
    code = raw.get("code") if isinstance(raw, Mapping) else raw
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _yaml_exchanges(path: str, doc: Any) -> tuple[str, list[HttpExchange]]:
    key = "interactions"
    if isinstance(doc, Mapping) and "http_interactions" in doc and "interactions" not in doc:
        key = "http_interactions"
    items = doc.get(key) if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        raise fail(
            path,
            None,
            "no 'interactions' (vcrpy) or 'http_interactions' (Ruby VCR) list",
            "pass a VCR cassette",
        )
    out = []
    for i, it in enumerate(items):
        at = f"{key}[{i}]"
        req = it.get("request") if isinstance(it, Mapping) else None
        res = it.get("response") if isinstance(it, Mapping) else None
        if not isinstance(req, Mapping):
            raise fail(path, None, "an interaction without a request", "fix the cassette", at=at)
        res = res if isinstance(res, Mapping) else {}
        out.append(
            HttpExchange(
                index=i,
                method=str(req.get("method") or "").upper(),
                uri=str(req.get("uri") or ""),
                request_headers=_headers(req.get("headers")),
                request_body=_vcr_body(req),
                status=_status(res.get("status", res.get("status_code"))),
                response_headers=_headers(res.get("headers")),
                response_body=_vcr_body(res),
                at=at,
            )
        )
    return ("ruby-vcr" if key == "http_interactions" else "vcrpy"), out


def _http_message(data: bytes) -> tuple[str, dict[str, str], bytes]:
    """Start line, headers (lower-case names) and body of one raw HTTP/1.x message."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        head, _, body = data.partition(b"\n\n")
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers.setdefault(name.strip().lower(), value.strip())
    return lines[0], headers, body


def _httprr_exchanges(path: str, data: bytes) -> list[HttpExchange]:
    pos, line = len(HTTPRR_MAGIC), 2
    out: list[HttpExchange] = []
    while pos < len(data):
        end = data.find(b"\n", pos)
        sizes = data[pos : end if end >= 0 else len(data)].split()
        try:
            nreq, nres = (int(x) for x in sizes)
        except ValueError:
            raise fail(
                path,
                line,
                "expected '<request bytes> <response bytes>' before an exchange",
                "pass a complete httprr trace",
            ) from None
        start = end + 1
        if nreq < 0 or nres < 0 or start + nreq + nres > len(data):
            raise fail(
                path,
                line,
                f"the exchange says {nreq} + {nres} bytes, more than the file holds",
                "the trace is truncated; re-record it",
            )
        request, response = data[start : start + nreq], data[start + nreq : start + nreq + nres]
        req_line, req_headers, req_body = _http_message(request)
        res_line, res_headers, res_body = _http_message(response)
        method, _, rest = req_line.partition(" ")
        status = res_line.split(" ")[1] if len(res_line.split(" ")) > 1 else ""
        out.append(
            HttpExchange(
                index=len(out),
                method=method.upper(),
                uri=rest.rsplit(" ", 1)[0] if " HTTP/" in rest else rest,
                request_headers=req_headers,
                request_body=req_body,
                status=int(status) if status.isdigit() else None,
                response_headers=res_headers,
                response_body=res_body,
                at=f"exchange {len(out)}",
                line=line,
            )
        )
        line += 1 + request.count(b"\n") + response.count(b"\n")
        pos = start + nreq + nres
    return out


def is_recording(head: bytes) -> bool:
    """Whether a file's first bytes are those of a recording: an httprr trace, or YAML
    whose top level has ``interactions`` (vcrpy) or ``http_interactions`` (Ruby VCR)."""
    if head.startswith(HTTPRR_MAGIC):
        return True
    return any(
        line.startswith((b"interactions:", b"http_interactions:"))
        for line in head.splitlines()[:50]
    )


def read_exchanges(path: str) -> tuple[str, list[HttpExchange]]:
    """``(recorder, exchanges)`` of a cassette or trace file: ``vcrpy``, ``ruby-vcr`` or
    ``httprr``."""
    data = read_bytes(path)
    if data.startswith(HTTPRR_MAGIC):
        return "httprr", _httprr_exchanges(path, data)
    return _yaml_exchanges(path, load_yaml(path, decode_text(path, data)))


def url_path(uri: str) -> str:
    """The path (and query) of a URL, or the string itself when it has no host."""
    if "://" not in uri:
        return uri
    rest = uri.split("://", 1)[1]
    return "/" + rest.split("/", 1)[1] if "/" in rest else "/"


def _bytes(body: Any) -> bytes:
    if isinstance(body, (dict, list)):
        return msgspec.json.encode(body)
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8", "surrogateescape")
    return b""
