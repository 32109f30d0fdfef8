"""The recall a replay reports (``session_recalls``: one walk, each message read once,
replays with the same body scored once) is the recall of each request scored whole
(its full text, every needed fact looked up in it) on corpus sessions replayed under
the default and the aggressive rules."""

from __future__ import annotations

import json

import pytest
from tests.corpus import CORPUS, FIRST

from ctxrules.batch import ReplayOptions, replay_detail
from ctxrules.batch.requests import session_data
from ctxrules.config import PipelineConfig
from ctxrules.errors import CtxrulesError
from ctxrules.importers import import_paths
from ctxrules.quality.needed import FactIndex, RecallReport, report, score
from ctxrules.quality.text import request_strings
from ctxrules.store import MemoryStore
from ctxrules.summarizers.facts import normalize


def _whole(session_id, nodes, bodies) -> RecallReport:
    """The specification: each request's needed facts looked up in its whole text."""
    index = FactIndex()
    scored = []
    for node in nodes:
        if node.role == "assistant" and node.caller is None and node.id in bodies:
            text = normalize(" ".join(request_strings(json.loads(bodies[node.id]))))
            scored.append(score(index.needed(node), text, node.id))
        index.add(node)
    return report(session_id, scored)


@pytest.fixture(scope="module")
def sessions():
    store = MemoryStore()
    for f in FIRST:
        try:
            import_paths(store, [str(CORPUS / f)])
        except CtxrulesError:
            pass
    # every eighth session: each format, short and long sessions
    ids = sorted(s.id for s in store.list_sessions())[::8]
    assert len(ids) >= 20
    return [session_data(store, i) for i in ids]


@pytest.mark.parametrize("preset", ["default", "aggressive"])
def test_the_replay_recall_is_each_request_scored_whole(sessions, preset):
    options = ReplayOptions.of(PipelineConfig.preset(preset))
    differ = 0
    for data in sessions:
        got = replay_detail(data, options)
        plain = {p.answer.id: prep.request.body for p, prep, *_ in got.plain if p.answer}
        rules = {p.answer.id: prep.request.body for p, prep, *_ in got.rules if p.answer}
        assert got.plain_recall == _whole(data.id, data.nodes, plain)
        assert got.rules_recall == _whole(data.id, data.nodes, rules)
        differ += sum(rules[k] != plain[k] for k in rules)
    if preset == "aggressive":
        assert differ  # the rules changed requests: both paths of the shared score ran


def test_a_request_whose_answer_needs_no_fact_is_not_read(sessions, monkeypatch):
    """Its recall is 0 of 0 whatever it holds: the body is not read (the report is the
    whole-text one all the same: the test above)."""
    from ctxrules.quality import needed as needed_module

    read: list[bytes] = []
    real = needed_module.RequestTexts.text

    def counted(self, body):
        read.append(body)
        return real(self, body)

    monkeypatch.setattr(needed_module.RequestTexts, "text", counted)
    options = ReplayOptions.of(PipelineConfig.preset("off"))
    answers = without = 0
    for data in sessions[:8]:
        got = replay_detail(data, options)
        bodies = {p.answer.id: prep.request.body for p, prep, *_ in got.plain if p.answer}
        index, wanted = FactIndex(), []
        for node in data.nodes:
            if node.role == "assistant" and node.caller is None and node.id in bodies:
                answers += 1
                if index.needed(node):
                    wanted.append(bodies[node.id])
                else:
                    without += 1
            index.add(node)
        read.clear()
        needed_module.session_recalls(data.id, data.nodes, [bodies])
        assert read == wanted
    assert 0 < without < answers
