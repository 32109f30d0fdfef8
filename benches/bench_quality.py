"""Context quality against cost: our presets and peer strategies replayed on the same
recorded sessions (benches/README.md, "Quality against cost").

Every session is replayed request by request (``ctxrules.batch.replay_detail``): once
with no rules — the requests the agent sent — and once per ctxrules policy.  The peers
(``benches/peers.py``) transform the no-rules requests as their documentation says.
For each policy, over all sessions:

- **share of tokens**: prompt tokens sent ÷ those with no rules;
- **recall** / **older-fact recall**: needed-fact recall of every request
  (``ctxrules.quality.needed``), pooled;
- **billed input vs no rules**: the prompts' cost with the provider's cache pricing
  (predicted cache reads and writes between consecutive requests) ÷ the same with no
  rules, pooled, and the worst session's ratio.

Peers are priced with the same bill (``ctxrules.batch.session.Bill``), so only the
requests differ.  headroom-ai runs when ``HEADROOM_PYTHON`` names an interpreter it is
installed in.

How to reproduce (the validation set; ``--split fit`` for the fit set)::

    .venv/bin/python benches/bench_quality.py --corpus tests/data/corpus

Under ``make test`` one small corpus session runs every policy once, checking the
figures' own promises (no rules is 1 everywhere; every share is a share).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxrules.batch import ReplayOptions, session_data
from ctxrules.batch.session import Bill, Replayed, replay_detail
from ctxrules.config import PRESETS, PipelineConfig
from ctxrules.errors import CtxrulesError
from ctxrules.importers import import_paths
from ctxrules.quality.needed import session_recall
from ctxrules.store import MemoryStore

sys.path.insert(0, str(Path(__file__).parent))
import peers

AGENT_KINDS = (
    "claude-code",
    "openhands",
    "swe-agent",
    "codex-rollout",
    "gemini-cli",
    "openai-chat-json",
)


@dataclass
class Row:
    """One policy's sums over the sessions.  ``prefix`` / ``plain_prefix`` are the
    harness prefix the recordings do not hold (estimated per request, the same in every
    replay of a session): no rule can touch it, so the share of the recorded tokens
    leaves it out of both sides."""

    name: str
    prompt: int = 0
    plain_prompt: int = 0
    prefix: int = 0
    plain_prefix: int = 0
    needed: int = 0
    kept: int = 0
    older_needed: int = 0
    older_kept: int = 0
    cost: float = 0.0
    plain_cost: float = 0.0
    worst: float = 0.0
    sessions: list[str] = field(default_factory=list)

    def add(
        self,
        sid: str,
        prompt: int,
        plain_prompt: int,
        recall: Any,
        cost: float,
        plain_cost: float,
        *,
        prefix: int,
        plain_prefix: int,
    ) -> None:
        self.prompt += prompt
        self.plain_prompt += plain_prompt
        self.prefix += prefix
        self.plain_prefix += plain_prefix
        self.needed += recall.needed
        self.kept += recall.kept
        self.older_needed += recall.older_needed
        self.older_kept += recall.older_kept
        self.cost += cost
        self.plain_cost += plain_cost
        if plain_cost:
            self.worst = max(self.worst, cost / plain_cost)
        self.sessions.append(sid)

    def cells(self) -> list[str]:
        def r(a: float, b: float) -> str:
            return f"{a / b:.2f}" if b else "–"

        return [
            self.name,
            r(self.prompt, self.plain_prompt),
            r(self.prompt - self.prefix, self.plain_prompt - self.plain_prefix),
            r(self.kept, self.needed),
            r(self.older_kept, self.older_needed),
            f"{r(self.cost, self.plain_cost)} (worst {self.worst:.2f})",
        ]


#: The fit set's choice for about a quarter of the recorded tokens (benches/README.md, "A
#: setting for a quarter of the recorded tokens"): not shipped, it lost on the
#: validation set.
FOLD = ReplayOptions.of(
    PipelineConfig(
        pipeline=("summarize",),
        rules={
            "summarize": {
                "threshold_tokens": 2000,
                "target_ratio": 0.25,
                "keep_tail_turns": 1,
                "summary_budget_tokens": 1000,
                "cache_aware": True,
                "payback": 3,
            }
        },
    )
)


#: Our policies: (name, the options of a session given its final no-rules item tokens).
def ours() -> list[tuple[str, Callable[[int, int], ReplayOptions]]]:
    def preset(name: str) -> Callable[[int, int], ReplayOptions]:
        return lambda final, usable: ReplayOptions.of(PipelineConfig.preset(name))

    def summarize_at(share: float) -> Callable[[int, int], ReplayOptions]:
        def make(final: int, usable: int) -> ReplayOptions:
            rules = {"threshold_tokens": max(1, int(final * share)), "keep_tail_turns": 1}
            return ReplayOptions.of(
                PipelineConfig(pipeline=("summarize",), rules={"summarize": rules})
            )

        return make

    def compaction_at(share: float) -> Callable[[int, int], ReplayOptions]:
        def make(final: int, usable: int) -> ReplayOptions:
            at = min(0.95, max(0.001, final * share / usable))
            engine = {"warn_at": at / 2, "compact_at": at, "critical_at": max(at, 0.95)}
            return ReplayOptions.of(PipelineConfig.preset("off"), engine=engine)

        return make

    presets = [n for n in ("default", "claude-code", "lean", "aggressive") if n in PRESETS]
    return [
        *((f"ctxrules `{n}`", preset(n)) for n in presets),
        (
            "ctxrules compaction whenever a request passes 50 % of the final size",
            compaction_at(0.5),
        ),
        ("ctxrules summarize-only at 25 % of the final size", summarize_at(0.25)),
        ("ctxrules summarize-only, summaries of 1,000 tokens, cache-aware", lambda f, u: FOLD),
    ]


def _peer_bill(
    done: Replayed, transform: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[int, float, dict[str, bytes]]:
    """A peer's prompt tokens, prompt cost and bodies: each no-rules request transformed."""
    bill = Bill(done.provider)
    bodies: dict[str, bytes] = {}
    for point, prep, prefix, out_tokens, priced in done.plain:
        body = transform(json.loads(prep.request.body))
        profile = done.provider.model_profile(prep.model)
        if priced is not None:
            profile = done.provider.model_profile(priced)
        est = done.provider.estimate_prompt(body, profile, prefix_tokens=prefix)
        bill.add(est, profile, point.now, out_tokens, prep.model)
        if point.answer is not None:
            bodies[point.answer.id] = json.dumps(body).encode()
    return bill.prompt, bill.input_cost or 0.0, bodies


def measure(
    sessions: Iterable[Any],
    *,
    with_peers: bool = True,
    headroom: peers.HeadroomRunner | None = None,
) -> list[Row]:
    """The table's rows over ``sessions`` (``SessionData``)."""
    off = ReplayOptions.of(PipelineConfig.preset("off"))
    rows: dict[str, Row] = {}
    for data in sessions:
        plain = replay_detail(data, off)
        p_fig = plain.record["plain"]
        plain_prompt, plain_cost = p_fig["prompt_tokens"], p_fig["input_cost_usd"] or 0.0
        plain_prefix = sum(prefix for _, _, prefix, _, _ in plain.plain)
        last = plain.plain[-1][1] if plain.plain else None
        final = last.commit.total_tokens if last is not None else 0
        usable = last.budget.usable if last is not None else 1
        rows.setdefault("no rules", Row("no rules")).add(
            data.id,
            plain_prompt,
            plain_prompt,
            plain.plain_recall,
            plain_cost,
            plain_cost,
            prefix=plain_prefix,
            plain_prefix=plain_prefix,
        )
        for name, make in ours():
            done = replay_detail(data, make(final, usable))
            r = done.record["rules"]
            rows.setdefault(name, Row(name)).add(
                data.id,
                r["prompt_tokens"],
                plain_prompt,
                done.rules_recall,
                r["input_cost_usd"] or 0.0,
                plain_cost,
                prefix=sum(prefix for _, _, prefix, _, _ in done.rules),
                plain_prefix=plain_prefix,
            )
        if not with_peers:
            continue
        chosen = {name: make(final) for name, make in peers.PEERS.items()}
        if headroom is not None:
            chosen[f"headroom-ai {headroom.version} `compress`"] = headroom
        for name, transform in chosen.items():
            prompt, cost, bodies = _peer_bill(plain, transform)
            recall = session_recall(data.id, data.nodes, bodies)
            rows.setdefault(name, Row(name)).add(
                data.id,
                prompt,
                plain_prompt,
                recall,
                cost,
                plain_cost,
                prefix=plain_prefix,  # a peer transforms the no-rules requests
                plain_prefix=plain_prefix,
            )
    return list(rows.values())


def table(rows: Sequence[Row]) -> str:
    head = [
        "policy",
        "share of tokens",
        "share of the recorded tokens",
        "recall",
        "older-fact recall",
        "billed input vs no rules",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


_CONVERSATION = {"user", "assistant", "system", "summary"}


def _conversation_lines(path: Path, folder: Path) -> Path:
    """A copy of a Claude Code transcript with only its conversation lines (valid JSON
    of the types the importer reads), each pointing past the lines left out to its
    nearest kept ancestor."""
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    dropped = {
        e["uuid"]: e.get("parentUuid")
        for e in entries
        if e.get("type") not in _CONVERSATION and isinstance(e.get("uuid"), str)
    }

    def kept(uuid: Any) -> Any:
        seen = set()
        while uuid in dropped and uuid not in seen:
            seen.add(uuid)
            uuid = dropped[uuid]
        return uuid

    out = folder / path.name
    lines = []
    for e in entries:
        if e.get("type") in _CONVERSATION:
            if "parentUuid" in e:
                e = {**e, "parentUuid": kept(e["parentUuid"])}
            lines.append(json.dumps(e, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n")
    return out


def corpus_sessions(
    corpus: Path, split: str, lenient: Path | None = None
) -> tuple[list[Any], list[str]]:
    """The agent sessions of ``split`` (MANIFEST.json), imported; files that do not
    import are listed apart (with ``lenient``, a folder, a Claude Code transcript the
    importer refuses is imported from its conversation lines alone)."""
    manifest = json.loads((corpus / "MANIFEST.json").read_text())
    store = MemoryStore()
    skipped = []
    for entry in manifest:
        if entry.get("split") != split or entry.get("kind") not in AGENT_KINDS:
            continue
        path = corpus / entry["path"]
        try:
            import_paths(store, [str(path)])
        except CtxrulesError as exc:
            if entry["kind"] != "claude-code" or not lenient:
                skipped.append(f"{entry['path']}: {str(exc)[:80]}")
                continue
            # Claude Code 2.x lines the importer does not know yet (progress, file
            # snapshots, queue operations, links) hold no conversation: left out.
            import_paths(store, [str(_conversation_lines(path, lenient))])
            skipped.append(f"{entry['path']}: imported without its non-conversation lines")
    data = [session_data(store, s.id) for s in sorted(store.list_sessions(), key=lambda s: s.id)]
    return [d for d in data if sum(n.role == "assistant" for n in d.nodes) > 1], skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(Path(__file__).parents[1] / "tests/data/corpus"))
    parser.add_argument("--split", default="validation", choices=("fit", "validation"))
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="import a Claude Code transcript the importer refuses from its conversation lines",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        lenient = Path(tmp) if args.lenient else None
        sessions, skipped = corpus_sessions(Path(args.corpus), args.split, lenient)
    python = peers.headroom_python()
    runner = peers.HeadroomRunner(python) if python and not args.no_peers else None
    try:
        rows = measure(sessions, with_peers=not args.no_peers, headroom=runner)
    finally:
        if runner is not None:
            runner.close()
    requests = sum(
        sum(1 for n in d.nodes if n.role == "assistant" and n.caller is None) for d in sessions
    )
    print(f"{args.split} set: {len(sessions)} sessions, {requests} answers")
    for s in skipped:
        print(f"not imported: {s}")
    print(table(rows))
    return 0


# -- under make test ------------------------------------------------------------------


def test_quality_table_on_one_session(corpus):
    store = MemoryStore()
    import_paths(
        store,
        [str(corpus / "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl")],
    )
    (info,) = store.list_sessions()
    rows = {r.name: r for r in measure([session_data(store, info.id)])}
    plain = rows["no rules"]
    assert plain.prompt == plain.plain_prompt and plain.cost == plain.plain_cost
    assert plain.kept == plain.needed > 0  # the requests as sent show every needed fact
    for row in rows.values():
        assert 0 <= row.kept <= row.needed == plain.needed, row.name
        assert 0 <= row.older_kept <= row.older_needed == plain.older_needed, row.name
        assert 0 < row.prompt <= 1.05 * plain.prompt, row.name
    assert "| no rules | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 (worst 1.00) |" in table(
        list(rows.values())
    )


def test_recorded_share_leaves_the_harness_prefix_out():
    class Recall:
        needed = kept = older_needed = older_kept = 1

    row = Row("policy")
    # 150 of 250 tokens sent, 100 of them the harness prefix on both sides: 50 of the
    # 150 recorded tokens are left.
    row.add("s", 150, 250, Recall(), 1.0, 2.0, prefix=100, plain_prefix=100)
    assert row.cells()[1:3] == ["0.60", "0.33"]


if __name__ == "__main__":
    raise SystemExit(main())
