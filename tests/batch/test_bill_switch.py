"""The replay's bill sees a switch of model: a provider caches a prompt per model, so
the first request sent to another model reads nothing of what the previous one wrote
(it writes its whole prompt), and a return to a model reads that model's own entry while
it lives.  The bill read the previous model's entries across the
switch, so a change of cached items the rules made there — free, the cache being empty
— was billed as a rewrite."""

from __future__ import annotations

from ctxrules.batch import Bill
from ctxrules.providers import get_provider

NOW = 1_767_225_600.0
SONNET, OPUS = "claude-sonnet-4-5", "claude-opus-4-5"


def _body(model: str, turns: int) -> dict:
    policy = " ".join(f"Rule {i}: answer with the ticket number." for i in range(600))
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Message {i} of the session."}
        for i in range(turns)
    ]
    messages[-1]["content"] = [
        {"type": "text", "text": messages[-1]["content"], "cache_control": {"type": "ephemeral"}}
    ]
    return {
        "model": model,
        "max_tokens": 100,
        "system": [{"type": "text", "text": policy, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    }


def _reads(
    models: list[str], *, name_the_model: bool = True, gaps: list[float] | None = None
) -> list[int]:
    """The cache reads of each request: the k-th sent to ``models[k]`` ``gaps[k - 1]``
    seconds after the one before (10 s by default)."""
    provider = get_provider("anthropic")
    bill = Bill(provider)
    reads = []
    now = NOW
    for k, model in enumerate(models):
        if k:
            now += gaps[k - 1] if gaps else 10.0
        profile = provider.model_profile(model)
        est = provider.estimate_prompt(_body(model, 2 * k + 1), profile)
        before = bill.read
        bill.add(est, profile, now, 10, model if name_the_model else None)
        reads.append(bill.read - before)
    return reads


def test_a_request_to_another_model_reads_nothing():
    same = _reads([SONNET, SONNET, SONNET])
    assert same[0] == 0 and same[1] > 0 and same[2] > 0
    switched = _reads([SONNET, OPUS, OPUS])
    assert switched == [0, 0, same[2]]


def test_a_return_to_a_model_reads_its_entry_while_it_lives():
    # Sonnet's entry outlives the request to Opus: the third request reads Sonnet's
    # cached prefix (the system prompt and the first message), not nothing.
    back = _reads([SONNET, OPUS, SONNET])
    assert back[1] == 0 and back[2] > 0
    assert back[2] == _reads([SONNET, SONNET], gaps=[20])[1]  # as if Opus was never asked
    # Gone after its TTL (five minutes since Sonnet's last request), however recently
    # Opus was asked.
    assert _reads([SONNET, OPUS, SONNET], gaps=[200, 200])[2] == 0


def test_an_unnamed_model_is_taken_as_the_previous_one():
    assert _reads([SONNET, OPUS, OPUS], name_the_model=False) == _reads([SONNET] * 3)


def test_requests_of_no_named_model_are_the_next_named_ones():
    # Unnamed, then Sonnet: the same model (the cache is read); then Opus: a switch.
    provider = get_provider("anthropic")
    bill = Bill(provider)
    reads = []
    for k, model in enumerate([None, SONNET, OPUS]):
        profile = provider.model_profile(model or SONNET)
        est = provider.estimate_prompt(_body(model or SONNET, 2 * k + 1), profile)
        before = bill.read
        bill.add(est, profile, NOW + 10 * k, 10, model)
        reads.append(bill.read - before)
    assert reads[0] == 0 and reads[1] > 0 and reads[2] == 0
