"""The rules' cache ledger sees a switch of model.

A provider caches a prompt per model: the first request sent to another model than the
previous one finds nothing cached and writes its whole prompt, whatever the rules do.
So a change to old items costs nothing there, as when the cache has gone cold, and the
cache-aware rules that waited (the rewrite did not pay yet) make it at the switch.  The
engine's compaction and the bill already knew this; the ledger took the cache as warm.

Sonnet and Opus have the same cache ratios (a read 0.1, a write 1.25): the rules'
version is the same for both, so only the model tells the ledger of the switch.
"""

from __future__ import annotations

from ctxrules.engine import Engine, TurnPrep
from ctxrules.ruleapi import cache

from .conftest import GREP_T0, grep_engine, grep_turn

NOW = GREP_T0
SONNET, OPUS = "claude-sonnet-4-5", "claude-opus-4-5"


def _play(sent_to: list[str]) -> tuple[Engine, list[TurnPrep]]:
    """Tool calls seconds apart (the cache stays warm), the k-th request sent to
    ``sent_to[k]``."""
    engine = grep_engine("anthropic", "aggressive", SONNET)
    preps = []
    for k, model in enumerate(sent_to):
        t = NOW + 10 * k
        grep_turn(engine.store, "s1", k, name=sent_to[k - 1] if k else SONNET, at=t)
        preps.append(engine.prepare("s1", now=t + 3, model=model))
    return engine, preps


def _changed(prep: TurnPrep) -> int:
    """Old tool results the rules changed (aged or capped)."""
    return sum(1 for it in prep.commit.items if it.role == "tool" and it.state != "full")


def test_a_rule_that_waited_acts_at_a_switch_of_model():
    # The premise: on one model the warm cache makes the aggressive preset wait.
    engine, same = _play([SONNET] * 4)
    assert [_changed(p) for p in same] == [0, 0, 0, 0]
    assert engine.pipeline_for(SONNET).version == engine.pipeline_for(OPUS).version
    # The fourth request goes to Opus: nothing of it is cached, so the change is free.
    _, switched = _play([SONNET] * 3 + [OPUS])
    assert [_changed(p) for p in switched[:3]] == [0, 0, 0]
    assert _changed(switched[3]) > 0
    assert switched[3].commit.total_tokens < same[3].commit.total_tokens
    # The ledger records the model each commit was priced for.
    assert switched[2].commit.cursors[cache.MODEL] == cache.model_key(SONNET)
    assert switched[3].commit.cursors[cache.MODEL] == cache.model_key(OPUS)


def test_the_ledger_is_cold_after_another_model_only():
    cursors = {cache.AT: int(NOW), cache.REQUESTS: 3, cache.MODEL: cache.model_key(SONNET)}

    def ledger(model: str, cursors: dict = cursors) -> cache.CacheLedger:
        return cache.CacheLedger(
            now=NOW + 10,
            cursors=cursors,
            cached_tokens=5_000,
            has_parent=True,
            rewritten=lambda: False,
            model=model,
        )

    assert not ledger(SONNET).cold and ledger(SONNET).rewrite_tokens() == 5_000
    assert ledger(OPUS).cold and ledger(OPUS).rewrite_tokens() == 0
    # Not known on either side: taken as the same model (the ledger errs on waiting).
    assert not ledger("").cold
    unrecorded = {cache.AT: int(NOW), cache.REQUESTS: 3}
    assert not ledger(OPUS, unrecorded).cold
    # A commit made for no named model drops the record.
    after = dict(cursors)
    cache.advance(after, [], [], NOW + 10, "")
    assert cache.MODEL not in after
    cache.advance(after, [], [], NOW + 20, OPUS)
    assert after[cache.MODEL] == cache.model_key(OPUS) != cache.model_key(SONNET)


def test_a_return_to_a_model_finds_its_entry_while_it_lives():
    # Sonnet, then Opus ten seconds later with nothing cached changed, then Sonnet again:
    # Sonnet's entry (from NOW) still lives at the provider, so the cache is warm and a
    # change would rewrite it.  The ledger kept only the previous request's model and
    # took the return as cold.
    cursors: dict[str, int] = {}
    cache.advance(cursors, [], [], NOW, SONNET)
    cache.advance(cursors, [], [], NOW + 10, OPUS)

    def ledger(at: float, cursors: dict = cursors) -> cache.CacheLedger:
        return cache.CacheLedger(
            now=at,
            cursors=cursors,
            cached_tokens=5_000,
            has_parent=True,
            rewritten=lambda: False,
            model=SONNET,
        )

    back = ledger(NOW + 20)
    assert not back.cold and back.rewrite_tokens() == 5_000
    # After its TTL (from Sonnet's own last request, not Opus's) it is gone.
    assert ledger(NOW + cache.TTL_SECONDS + 1).cold
    # A commit that changed a cached item leaves the other models' entries behind.
    changed = {}
    cache.advance(changed, [], [], NOW, SONNET)
    cache.advance(changed, [], [], NOW + 10, OPUS, changed=True)
    assert cache.model_at(SONNET) not in changed and cache.model_at(OPUS) in changed
    assert ledger(NOW + 20, changed).cold


def test_the_engine_forgets_an_entry_a_change_left_behind():
    # At the switch to Opus the rules age what they had waited with (free there): the
    # prompt Sonnet cached no longer matches, so the return to Sonnet is cold.
    _, preps = _play([SONNET] * 3 + [OPUS, SONNET])
    assert _changed(preps[3]) > 0
    assert cache.model_at(SONNET) in preps[2].commit.cursors
    assert cache.model_at(SONNET) not in preps[3].commit.cursors
    assert preps[3].commit.cursors[cache.model_at(OPUS)] == int(NOW + 33)
