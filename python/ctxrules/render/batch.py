"""Many commits rendered in one crossing into Rust: every commit for every provider
(``render_batch``), or the successive requests of sessions, each body written from the
previous one's bytes (``render_sessions``, ``render_session``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import msgspec

from .. import _core
from ..errors import RenderError
from ..model import ContextCommit, ContextItem
from ..providers.base import BAD_COMMIT, Provider, RenderedRequest, RequestOptions
from ..providers.estimate import Estimate, EstimateFrame
from .options import encode_commit, provider_of, request_options

__all__ = ["MAX_THREADS", "SessionOptions", "render_batch", "render_session", "render_sessions"]

#: Most threads ``render_batch`` may be given.
MAX_THREADS = 1024


def check_threads(threads: int | None, where: str) -> None:
    """``RenderError`` unless ``threads`` is None or an int from 1 to ``MAX_THREADS``."""
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS
    ):
        raise RenderError(
            f"threads must be an int from 1 to {MAX_THREADS} or None, not {threads!r}",
            where=where,
        )


@overload
def render_batch(
    commits: Sequence[ContextCommit | bytes],
    providers: Sequence[str | Provider],
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    threads: int | None = None,
    estimate: bool = False,
    errors: Literal["raise"] = "raise",
) -> list[list[RenderedRequest]]: ...


@overload
def render_batch(
    commits: Sequence[ContextCommit | bytes],
    providers: Sequence[str | Provider],
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    threads: int | None = None,
    estimate: bool = False,
    errors: Literal["return"],
) -> list[list[RenderedRequest | RenderError]]: ...


def render_batch(
    commits: Sequence[ContextCommit | bytes],
    providers: Sequence[str | Provider],
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    threads: int | None = None,
    estimate: bool = False,
    errors: Literal["raise", "return"] = "raise",
) -> list[list[RenderedRequest]] | list[list[RenderedRequest | RenderError]]:
    """Render every commit for every provider in one crossing into Rust.

    ``result[i][j]`` is ``commits[i]`` rendered for ``providers[j]``: the same request,
    byte for byte, as ``render(commits[i], providers[j], **options_i)``.  ``options`` are
    the keyword options of ``render`` (``model``, ``system``, ``situation``, ``tools``,
    ``max_tokens``, ``extra``, ``cache``, ``cache_ttl``): one mapping for all commits, or
    one per commit.

    With the GIL released, each commit is decoded once and all bodies are rendered in
    parallel: on rayon's global pool (every core, or ``RAYON_NUM_THREADS``) when
    ``threads`` is None, else on a pool of exactly ``threads`` threads (1 to
    ``MAX_THREADS``; pools are kept per size).  Every body is held until the call returns,
    so render a large corpus in chunks.  Providers without a built-in wire format are
    rendered one by one through their ``build_body``.  ``estimate=True`` makes each
    request's billed-prompt estimate with its body (``RenderedRequest.estimate``, see
    ``render``).  With ``errors="raise"`` the first failure raises ``RenderError``
    (naming the commit and provider); with ``errors="return"`` it takes that request's
    place in the result.
    """
    check_threads(threads, "render_batch")
    provs = [provider_of(p) for p in providers]
    encoded = [encode_commit(c) for c in commits]
    if options is None or isinstance(options, Mapping):
        per_commit: list[Mapping[str, Any]] = [options or {}] * len(encoded)
    else:
        per_commit = list(options)
        if len(per_commit) != len(encoded):
            raise RenderError(
                f"{len(per_commit)} option mappings for {len(encoded)} commits",
                where="render_batch",
                hint="pass one mapping for all commits, or one per commit",
            )
    out: list[list[Any]] = [[None] * len(provs) for _ in encoded]
    shared = _Options(estimate)
    prepare = [_Prepared(prov, shared) for prov in provs]
    jobs: list[tuple[str, int, int]] = []
    slots: list[tuple[int, int, Provider, RequestOptions]] = []
    for i, (commit, kw) in enumerate(zip(commits, per_commit)):
        for j, prov in enumerate(provs):
            opts, o = prepare[j](kw)
            if prov.wire is None:
                out[i][j] = prov.render(commit, opts, estimate=estimate)
                continue
            jobs.append((prov.wire, i, o))
            slots.append((i, j, prov, opts))
    payloads = shared.payloads
    try:
        results = _core.render_batch(
            [data for data, _ in encoded],
            [(w, i, payloads[o]) for w, i, o in jobs],
            threads,
            [shared.frames[o] for _, _, o in jobs] if estimate else None,
        )
    except (ValueError, TypeError) as exc:
        raise RenderError(str(exc), where="render_batch", hint=BAD_COMMIT) from None
    for (i, j, prov, opts), res in zip(slots, results):
        if isinstance(res, str):
            err = RenderError(res, where=f"{encoded[i][1]}, provider {prov.name}", hint=BAD_COMMIT)
            if errors == "raise":
                raise err
            out[i][j] = err
        else:
            body, raw_meta, made = res
            est: Estimate | None = made
            if estimate and est is None:
                est = prov.estimate_body(opts, body)
            out[i][j] = prov.rendered(opts, body, msgspec.json.decode(raw_meta), est)
    return out


#: Options of ``render_sessions``: one mapping for every request, or per session one
#: mapping for all its requests or one per request.
SessionOptions = Mapping[str, Any] | Sequence[Mapping[str, Any] | Sequence[Mapping[str, Any]]]


def _session_options(
    options: SessionOptions | None, sessions: Sequence[Sequence[Any]]
) -> list[list[Mapping[str, Any]]]:
    """Per session, the options mapping of each request (see ``render_sessions``)."""
    if options is None or isinstance(options, Mapping):
        return [[options or {}] * len(commits) for commits in sessions]
    per_session = list(options)
    if len(per_session) != len(sessions):
        raise RenderError(
            f"{len(per_session)} option entries for {len(sessions)} sessions",
            where="render_sessions",
            hint="pass one mapping for all, or per session a mapping or a list of mappings",
        )
    out: list[list[Mapping[str, Any]]] = []
    for s, (entry, commits) in enumerate(zip(per_session, sessions)):
        if isinstance(entry, Mapping):
            out.append([entry] * len(commits))
            continue
        each = list(entry)
        if len(each) != len(commits):
            raise RenderError(
                f"session {s}: {len(each)} option mappings for {len(commits)} requests",
                where="render_sessions",
                hint="pass one mapping for the session, or one per request",
            )
        out.append(each)
    return out


@overload
def render_sessions(
    sessions: Sequence[Sequence[ContextCommit | bytes]],
    providers: Sequence[str | Provider],
    *,
    options: SessionOptions | None = None,
    threads: int | None = None,
    meta: bool = True,
    estimate: bool = False,
    errors: Literal["raise"] = "raise",
) -> list[list[list[RenderedRequest]]]: ...


@overload
def render_sessions(
    sessions: Sequence[Sequence[ContextCommit | bytes]],
    providers: Sequence[str | Provider],
    *,
    options: SessionOptions | None = None,
    threads: int | None = None,
    meta: bool = True,
    estimate: bool = False,
    errors: Literal["return"],
) -> list[list[list[RenderedRequest] | RenderError]]: ...


def render_sessions(
    sessions: Sequence[Sequence[ContextCommit | bytes]],
    providers: Sequence[str | Provider],
    *,
    options: SessionOptions | None = None,
    threads: int | None = None,
    meta: bool = True,
    estimate: bool = False,
    errors: Literal["raise", "return"] = "raise",
) -> list[list[list[RenderedRequest]]] | list[list[list[RenderedRequest] | RenderError]]:
    """Render the successive requests of sessions incrementally, in one crossing into Rust.

    ``sessions[i]`` is one session's requests in order, each given by its commit;
    ``result[i][j][k]`` is request ``k`` of session ``i`` for ``providers[j]``: the same
    request, byte for byte, as ``render(sessions[i][k], providers[j], **options)``.
    Successive requests share their beginning, so each body after the first is written
    as the previous body's bytes up to the first message (or head, or breakpoint) that
    provably changed, then the rest: the cost of a request is mostly one copy.  Nothing
    is guessed — what cannot be shown to be the same is written again.  ``options`` are
    the keyword options of ``render``: one mapping for every request, or one entry per
    session (a mapping for all its requests, or a list with one per request; the same
    mapping object repeated is prepared once).

    With the GIL released, each session is decoded once (an item object is read once
    however many of its commits hold it) for all its providers, and the (session,
    provider) chains are rendered in parallel — in order within a chain — on rayon's
    global pool or a pool of ``threads`` threads (as ``render_batch``); with fewer
    chains than threads, a chain is cut into pieces that each start with a full render,
    so a single long session uses every thread.  Every body is
    held until the call returns: pass as many sessions as fit in memory.  ``meta=False``
    leaves each ``RenderedRequest.meta`` empty (the breakdown is not made: for callers
    that only need the bodies).  ``estimate=True`` makes each request's billed-prompt
    estimate from its plan as it is rendered (``RenderedRequest.estimate``, see
    ``render``).  Providers without a built-in wire format are rendered one request at
    a time through ``build_body``.  With ``errors="raise"`` the first failure raises
    ``RenderError``; with ``errors="return"`` it takes the place of that session's list
    for that provider.
    """
    check_threads(threads, "render_sessions")
    provs = [provider_of(p) for p in providers]
    sessions = [list(commits) for commits in sessions]
    per_request = _session_options(options, sessions)
    # Handed over as they are (item tuples or bytes), without a container per commit:
    # a call for a whole corpus must not feed the cyclic GC thousands of objects.
    data = [[_commit_data(c) for c in commits] for commits in sessions]
    out: list[list[Any]] = [[None] * len(provs) for _ in sessions]
    shared = _Options(estimate)
    chains: list[tuple[str, int, list[int]]] = []
    slots: list[tuple[int, int, Provider, list[RequestOptions]]] = []
    # Sessions of one harness carry the same tools and system text: prepared once.
    prepare = [_Prepared(prov, shared) for prov in provs]
    for i, (commits, kws) in enumerate(zip(sessions, per_request)):
        for j, prov in enumerate(provs):
            which: list[int] = []
            opts_of: list[RequestOptions] = []
            for kw in kws:
                opts, o = prepare[j](kw)
                which.append(o)
                opts_of.append(opts)
            if prov.wire is None:
                out[i][j] = [prov.render(c, o, estimate=estimate) for c, o in zip(commits, opts_of)]
                continue
            chains.append((prov.wire, i, which))
            slots.append((i, j, prov, opts_of))
    try:
        results = _core.render_sessions(
            data, shared.payloads, chains, threads, meta, shared.frames if estimate else None
        )
    except (ValueError, TypeError) as exc:
        raise RenderError(str(exc), where="render_sessions", hint=BAD_COMMIT) from None
    decode = msgspec.json.decode
    for (i, j, prov, opts_of), (bodies, metas, _reused, ests) in zip(slots, results):
        if isinstance(bodies, str):
            err = RenderError(bodies, where=f"session {i}, provider {prov.name}", hint=BAD_COMMIT)
            if errors == "raise":
                raise err
            out[i][j] = err
            continue
        made: list[Estimate | None] = list(ests) if estimate else [None] * len(bodies)
        if estimate and None in made:  # options without a core frame: the specification
            made = [
                e if e is not None else prov.estimate_body(o, b)
                for e, o, b in zip(made, opts_of, bodies)
            ]
        metas_of = [decode(m) for m in metas] if meta else [{}] * len(bodies)
        out[i][j] = [
            prov.rendered(o, body, m, e) for o, body, m, e in zip(opts_of, bodies, metas_of, made)
        ]
    return out


class _Options:
    """The wire options of one call, each distinct one once: its JSON (``payloads``,
    what the core parses) and, when the call estimates, its estimate frame (``frames``),
    by index (per provider: the same JSON of two wires makes two frames)."""

    def __init__(self, estimate: bool) -> None:
        self.estimate = estimate
        self.index: dict[tuple[str, bytes], int] = {}
        self.payloads: list[bytes] = []
        self.frames: list[EstimateFrame | None] = []

    def add(self, prov: Provider, opts: RequestOptions, encoded: bytes) -> int:
        """The index of ``opts`` (wire options of ``prov``, ``encoded`` their JSON)."""
        key = (prov.name, encoded)
        o = self.index.get(key)
        if o is None:
            o = self.index[key] = len(self.payloads)
            self.payloads.append(encoded)
            self.frames.append(
                prov.frame(opts, encoded) if self.estimate and prov.wire is not None else None
            )
        return o


class _Prepared:
    """The ``RequestOptions`` of ``render`` options for one provider, as ``render`` makes
    them, and their index in the call's ``_Options`` (shared by the providers of a
    call, added to if new): ``render_batch`` and ``render_sessions`` prepare each
    distinct value once, not once per commit.

    A mapping is found by its identity first (the caller keeps every mapping it passes
    alive for the call), then by its MessagePack (which tells str from bytes, so equal
    bytes are equal arguments of the pure ``request_options``); values msgspec cannot
    encode are prepared once per mapping object.
    """

    def __init__(self, prov: Provider, shared: _Options) -> None:
        self.prov = prov
        self.shared = shared
        self.by_id: dict[int, tuple[RequestOptions, int]] = {}
        self.by_value: dict[bytes, tuple[RequestOptions, int]] = {}

    def __call__(self, kw: Mapping[str, Any]) -> tuple[RequestOptions, int]:
        done = self.by_id.get(id(kw))
        if done is not None:
            return done
        try:
            key: bytes | None = msgspec.msgpack.encode(kw)
        except (TypeError, OverflowError, msgspec.EncodeError):  # e.g. ints past 64 bits
            key = None
        done = self.by_value.get(key) if key is not None else None
        if done is None:
            rest = dict(kw)
            opts = request_options(self.prov, rest.pop("model", None), **rest)
            if self.prov.wire is not None:
                opts = self.prov.wire_options(opts)
            done = (opts, self.shared.add(self.prov, opts, msgspec.json.encode(opts)))
            if key is not None:
                self.by_value[key] = done
        self.by_id[id(kw)] = done
        return done


def _commit_data(commit: ContextCommit | bytes) -> bytes | tuple[ContextItem, ...]:
    """What the core is handed for a commit (as ``_encode``, without its name)."""
    if isinstance(commit, ContextCommit):
        return commit.items
    return commit if isinstance(commit, bytes) else encode_commit(commit)[0]


def render_session(
    commits: Sequence[ContextCommit | bytes],
    provider: str | Provider,
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
) -> list[RenderedRequest]:
    """The requests of one session for one provider, rendered incrementally: each the
    same bytes as ``render(commits[k], provider, **options_k)`` (``options``: one mapping
    for all, or one per request).  See ``render_sessions``, which renders many sessions
    and providers in parallel."""
    return render_sessions([commits], [provider], options=[options or {}])[0][0]
