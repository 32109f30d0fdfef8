"""Fixtures for the provider tests: cassette sessions and a loopback HTTP server.

A cassette session is the last recorded request of a VCR cassette imported through the
ordinary importer into a fresh store and committed with the default rules — the same
path a user's session takes.  The loopback server records what an official SDK sent
and answers with a canned response.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxrules.commit import make_commit
from ctxrules.importers import import_paths
from ctxrules.model import ContextCommit, Node
from ctxrules.store import open_store

#: Where the cassettes are (the same corpus the ``corpus`` fixture points at).
CORPUS_CASSETTES = Path(__file__).resolve().parents[1] / "data" / "corpus" / "vcr-cassettes-yaml"

CASSETTES = {
    "anthropic": [
        "anthropic/test_multiple_parallel_tool_calls.yaml",
        "anthropic/test_anthropic_tool_with_thinking.yaml",
        "anthropic/test_anthropic_cache_real_api.yaml",
    ],
    "openai-chat": ["openai-chat/test_tool_search_eval_openai-chat.yaml"],
    "gemini": ["gemini/test_google_instructions_only_with_tool_calls.yaml"],
}


@dataclass
class CassetteSession:
    """A cassette's last request as a committed session, plus what was really sent."""

    path: Path
    commit: ContextCommit
    metadata: dict[str, Any]
    request: dict[str, Any]  # the recorded request body, read straight from the YAML
    response: dict[str, Any]  # the recorded response body
    uri: str


def load_cassette(path: Path, interaction: int = -1) -> tuple[dict[str, Any], dict[str, Any], str]:
    """One interaction's request body, response body and URI (plain YAML reading)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    it = doc["interactions"][interaction]
    return it["request"]["parsed_body"], it["response"]["parsed_body"], it["request"]["uri"]


def conversation(turns: list[tuple[str, Any]]) -> list[Node]:
    """Conversation nodes from ``(role, output)`` pairs, each the predecessor of the next
    (ids ``n0``, ``n1``, …)."""
    calls: list[Node] = []
    for i, (role, output) in enumerate(turns):
        calls.append(
            Node(
                id=f"n{i}",
                seq=i,
                created_at=float(i),
                role=role,
                output=output,
                predecessor=calls[-1].id if calls else None,
            )
        )
    return calls


def interaction_count(path: Path) -> int:
    """How many interactions a cassette records."""
    return len(yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"])


def cassette_cases(misses: dict[str, str] | None = None) -> list[Any]:
    """``(kind, rel, interaction)`` parameters: every interaction of every cassette;
    the cassettes (``name``) or interactions (``name#i``) named in ``misses`` marked as
    expected (strict) failures, with why."""
    misses = misses or {}

    def param(kind: str, rel: str, i: int) -> Any:
        name = rel.split("/")[-1]
        why = misses.get(f"{name}#{i}") or misses.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        return pytest.param(kind, rel, i, id=f"{name}#{i}", marks=marks)

    return [
        param(kind, rel, i)
        for kind, rels in CASSETTES.items()
        for rel in rels
        for i in range(interaction_count(CORPUS_CASSETTES / rel))
    ]


@pytest.fixture(scope="session")
def cassette_session(
    corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], CassetteSession]:
    """Import a cassette (by path under vcr-cassettes-yaml) with the ``cassette-all``
    importer and commit one interaction's request (default: the last)."""
    store = open_store(tmp_path_factory.mktemp("cassettes"))
    cache: dict[tuple[str, int], CassetteSession] = {}

    def get(rel: str, interaction: int = -1) -> CassetteSession:
        path = corpus / "vcr-cassettes-yaml" / rel
        index = interaction % interaction_count(path)
        if (rel, index) not in cache:
            results = import_paths(store, [str(path)], format="cassette-all")
            infos = [store.get_session(r.id) for r in results]
            (info,) = [i for i in infos if i.metadata.get("interaction") == index]
            commit = make_commit(info.id, store=store, now=0.0)
            request, response, uri = load_cassette(path, index)
            cache[rel, index] = CassetteSession(
                path, commit, dict(info.metadata), request, response, uri
            )
        return cache[rel, index]

    return get


@dataclass
class Exchange:
    """What the loopback server saw: method, path, headers and the decoded JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Loopback:
    """A 127.0.0.1 HTTP server on a random port answering every POST with ``reply``."""

    url: str
    reply: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    seen: list[Exchange] = field(default_factory=list)
    check: Callable[[Any], list[str]] | None = None
    problems: list[str] = field(default_factory=list)


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    """Start the server for one test; ``check`` (a validator) runs on every request body."""
    state: Loopback

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(n)
            body = json.loads(raw) if raw else None
            state.seen.append(
                Exchange("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if state.check is not None:
                state.problems.extend(state.check(body))
            out = json.dumps(state.reply).encode()
            self.send_response(state.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = Loopback(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
