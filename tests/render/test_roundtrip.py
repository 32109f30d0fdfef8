"""Round-trip: every recorded request body of the corpus, imported and rendered for the
wire it was recorded on with no rules (preset ``off``), is the recorded body.

Each file of recorded traffic (vcrpy, Ruby VCR and httprr recordings of the Anthropic
Messages, OpenAI Chat Completions, OpenAI Responses and Gemini APIs) is imported with
``cassette-all`` (one session per call), and the request at each session's HEAD is
rendered for its own provider with what the session recorded
(``ctxrules.requests.render_defaults``).  The body must equal the recorded one as JSON
(key order aside) — except ``stream`` / ``stream_options``, how the client read the
answer, which a render never sends (docs/sessions.md).  The expected values are the
recorded bodies themselves, read with plain JSON parsing.

Goal (issue 20): at least 95 % of the bodies, on the fit and the validation set
(``tests/corpus.py``) alike.  ``MISSES`` lists every body that does not round-trip,
with why; a listed body that starts to round-trip, or a new miss, fails the test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxrules.commit import make_commit
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.render import render
from ctxrules.requests import Request, render_defaults
from ctxrules.store import open_store

from ..corpus import CORPUS, entries

#: The corpus kinds that record provider traffic.
KINDS = ("cassette-yaml", "cassette-yaml-pydantic-ai", "cassette-yaml-ruby-vcr", "httprr")
#: Body fields of how a client reads the answer, never rendered.
TRANSPORT = frozenset({"stream", "stream_options"})
#: The round-trip goal, per split.
GOAL = 0.95
OFF = PipelineConfig.preset("off")

#: Every recorded body that does not round-trip ("file#interaction"), and why.
MISSES: dict[str, str] = {}


def differences(ours: Any, recorded: Any, at: str = "$") -> list[str]:
    """Where two JSON values differ (dict key order aside), as JSON paths."""
    if type(ours) is not type(recorded):
        return [f"{at}: {type(ours).__name__} instead of {type(recorded).__name__}"]
    if isinstance(ours, dict):
        out = []
        for k in sorted(set(ours) | set(recorded)):
            if k not in ours:
                out.append(f"{at}.{k}: missing")
            elif k not in recorded:
                out.append(f"{at}.{k}: not recorded")
            else:
                out.extend(differences(ours[k], recorded[k], f"{at}.{k}"))
        return out
    if isinstance(ours, list):
        out = [] if len(ours) == len(recorded) else [f"{at}: {len(ours)} not {len(recorded)} long"]
        for i, (a, b) in enumerate(zip(ours, recorded)):
            out.extend(differences(a, b, f"{at}[{i}]"))
        return out
    return [] if ours == recorded else [f"{at}: differs"]


def _body(store: Any, session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request at the session's HEAD rendered for its recorded provider, and the
    recorded body (both without the transport fields)."""
    meta = store.get_session(session).metadata
    provider = meta["provider"]
    commit = make_commit(session, None, now=0.0, store=store, config=OFF)
    request = Request(session_id=session, commit=commit, situation="", sent_at=0.0)
    options = render_defaults(store, request, provider).options
    ours = json.loads(render(commit, provider, **options).body)
    recorded = json.loads(meta["request_body"])
    strip = lambda body: {k: v for k, v in body.items() if k not in TRANSPORT}  # noqa: E731
    return strip(ours), strip(recorded)


def round_trips(tmp: Path) -> dict[str, tuple[str, list[str]]]:
    """Every recorded body of the corpus: "file#interaction" → (split, differences)."""
    store = open_store(tmp / "store")
    out: dict[str, tuple[str, list[str]]] = {}
    for entry in entries(kind=KINDS):
        name = Path(entry["path"]).name
        for res in import_paths(store, [str(CORPUS / entry["path"])], format="cassette-all"):
            interaction = store.get_session(res.id).metadata["interaction"]
            ours, recorded = _body(store, res.id)
            out[f"{name}#{interaction}"] = (entry["split"], differences(ours, recorded))
    store.close()
    return out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str]]]:
    return round_trips(tmp_path_factory.mktemp("roundtrip"))


def rates(outcomes: dict[str, tuple[str, list[str]]]) -> dict[str, tuple[int, int]]:
    """(round-tripped, bodies) per split and for the whole corpus."""
    out: dict[str, tuple[int, int]] = {}
    for split in ("fit", "validation", None):
        rows = [d for s, d in outcomes.values() if split is None or s == split]
        out[split or "corpus"] = (sum(not d for d in rows), len(rows))
    return out


def test_recorded_bodies_round_trip(outcomes):
    found = rates(outcomes)
    report = ", ".join(f"{k} {ok}/{n} ({ok / n:.1%})" for k, (ok, n) in found.items())
    print(f"\nround-trip: {report}")
    misses = {key: diffs for key, (_, diffs) in outcomes.items() if diffs}
    for key in sorted(misses):
        print(f"  {key}: {MISSES.get(key, 'NEW')} — {'; '.join(misses[key][:3])}")
    assert sorted(set(misses) - set(MISSES)) == [], "new misses (see the report above)"
    assert sorted(set(MISSES) - set(misses)) == [], "listed misses that now round-trip"
    for split in ("fit", "validation"):
        ok, n = found[split]
        assert n > 0 and ok / n >= GOAL, (split, ok, n)


def test_the_difference_finder_sees_what_differs():
    """The comparison the rate rests on: key order aside, anything else counts."""
    assert differences({"a": 1, "b": [1, {"c": "x"}]}, {"b": [1, {"c": "x"}], "a": 1}) == []
    assert differences({"a": [1]}, {"a": [1, 2]}) == ["$.a: 1 not 2 long"]
    assert differences({"a": {"t": True}}, {"a": {"t": 1}}) == ["$.a.t: bool instead of int"]
    assert differences({"x": "1"}, {}) == ["$.x: not recorded"]
    assert re.fullmatch(r"\$\.m\[0\]: differs", differences({"m": ["a"]}, {"m": ["b"]})[0])
