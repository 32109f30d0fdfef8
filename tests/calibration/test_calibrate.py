"""``ctxrules calibrate``: recorded calls read with their bills, constants fitted on
them, and the profile written, loaded and used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from tests.corpus import CORPUS, files

from ctxrules.calibration import calibrate, estimate_observation, read_observations, to_toml
from ctxrules.calibration.fit import MIN_REQUESTS_PER_NUMBER, PARAMETERS, _value, _with
from ctxrules.calibration.observe import Observation
from ctxrules.errors import ValidationError
from ctxrules.plugins import reset
from ctxrules.providers import get_provider, load_profile, read_profile, resolve_model
from ctxrules.providers.usage import Usage


def test_an_httprr_trace_is_read_with_its_bills():
    path = CORPUS / "httprr/gemini/langchaingo__TestGoogleAIToolCallResponse.httprr"
    obs = read_observations([path])
    assert [o.index for o in obs] == [0, 1]
    assert {o.wire for o in obs} == {"gemini"} and obs[0].model == "gemini-2.0-flash"
    assert obs[0].body["contents"][0]["parts"][0]["text"] == "What is 15 * 7?"
    assert obs[0].billed == 21 and obs[0].own_model


def test_every_cassette_kind_of_the_corpus_is_read():
    skipped: list[tuple[str, str]] = []
    obs = read_observations(files(kind=("cassette-yaml", "httprr")), skipped=skipped)
    assert {o.wire for o in obs} == {"anthropic", "openai-chat", "openai-responses", "gemini"}
    assert len(obs) > 300
    # What is skipped is said, with why.
    assert all(why for _, why in skipped)


def _synthetic(true_block: float, n: int = 12) -> list[Observation]:
    """Anthropic requests whose bill follows the estimator with ``tool_block`` set to
    ``true_block``: a fit must find it again."""
    provider = get_provider("anthropic")
    base = resolve_model("anthropic:claude-sonnet-4-5")
    truth = msgspec.structs.replace(base, estimator={**base.estimator, "tool_block": true_block})
    out = []
    for i in range(n):
        messages: list[dict] = [{"role": "user", "content": f"question {i} " * (i + 1)}]
        for k in range(i % 4 + 1):
            messages += [
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{k}",
                            "name": "f",
                            "input": {"q": "x" * (i + k)},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{k}", "content": "ok " * (k + 1)}
                    ],
                },
            ]
        body = {"model": "claude-sonnet-4-5", "max_tokens": 9, "messages": messages}
        billed = provider.estimate_prompt(body, truth).input_tokens
        out.append(
            Observation(
                source=f"s{i % 3}",
                index=i,
                wire="anthropic",
                model="claude-sonnet-4-5",
                body=body,
                usage=Usage(input_tokens=billed),
                own_model=True,
            )
        )
    return out


def test_calibrate_finds_a_constant_again_and_validates_it():
    obs = _synthetic(60.0)
    (fit,) = calibrate(obs[:9], obs[9:])
    assert fit.before["tool_block"] == 33
    assert abs(fit.after["tool_block"] - 60) < 3
    assert fit.fit_after["p90"] < fit.fit_before["p90"]
    assert fit.validation_after["p90"] < 0.01 < fit.validation_before["p90"]


def test_the_profile_written_is_loaded_and_changes_the_estimate(tmp_path: Path, monkeypatch):
    obs = _synthetic(60.0)
    fits = calibrate(obs, obs)
    path = tmp_path / "mine.toml"
    path.write_text(to_toml(fits, sources=["s0"]), encoding="utf-8")
    (entry,) = read_profile(path)
    assert entry.pattern == "anthropic:claude-sonnet-4-5"
    assert entry.basis and all(v.startswith("calibrated:") for v in entry.basis.values())
    before = estimate_observation(obs[5]).input_tokens
    try:
        load_profile(path)
        profile = resolve_model("anthropic:claude-sonnet-4-5")
        assert abs(profile.rule("tool_block") - 60) < 3
        assert profile.sources["estimator.tool_block"].startswith("profile:")
        after = estimate_observation(obs[5]).input_tokens
        assert abs(after - obs[5].billed) < abs(before - obs[5].billed)
        # Other models keep the built-in rules.
        assert resolve_model("anthropic:claude-opus-4-6").rule("tool_block") == 33
        assert resolve_model("anthropic:claude-haiku-4-5").rule("tool_block") == 21
    finally:
        reset()


def test_a_bad_profile_is_refused_naming_the_entry(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[model]]\npattern = "anthropic:x"\nwhatever = 1\n', encoding="utf-8")
    with pytest.raises(ValidationError, match="model 1"):
        read_profile(bad)
    bad.write_text('[[model]]\npattern = "anthropic:x"\nestimator = { tool_block = -1 }\n')
    with pytest.raises(ValidationError, match="tool_block"):
        read_profile(bad)


def _calibrate(*args: str) -> subprocess.CompletedProcess[str]:
    """``ctxrules calibrate ARGS`` run as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "ctxrules", "calibrate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_command_prints_the_errors_and_writes_the_profile(tmp_path: Path):
    sources = [str(p) for p in files(kind="cassette-yaml", wire="openai-responses", split="fit")]
    out = tmp_path / "p.toml"
    run = _calibrate(*sources, "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    fitted = {m["model"]: m for m in report["models"]}
    assert "gpt-5.4" in fitted
    m = fitted["gpt-5.4"]
    # Least squares on the relative errors: the tail does not get worse; the median,
    # already under 1 %, may move by a fraction of a point.
    before, after = m["fit_errors"]["before"], m["fit_errors"]["after"]
    assert after["p90"] <= before["p90"]
    assert after["median"] <= before["median"] + 0.005
    assert read_profile(out)
    # A second run will not overwrite a file that is not a profile of ours.
    other = tmp_path / "notes.toml"
    other.write_text("mine\n", encoding="utf-8")
    again = _calibrate(*sources, "--out", str(other))
    assert again.returncode != 0 and other.read_text() == "mine\n"


def _gemini_split() -> tuple[list[Observation], list[Observation]]:
    """The corpus's Gemini calls with usage: the fit set's and the validation set's."""
    kinds = ("cassette-yaml", "httprr")
    fit, held = (
        [o for o in read_observations(files(kind=kinds, wire="gemini", split=s)) if o.own_model]
        for s in ("fit", "validation")
    )
    return fit, held


def _without_schema(body: dict) -> dict:
    config = {
        k: v
        for k, v in body["generationConfig"].items()
        if k not in ("responseSchema", "responseJsonSchema", "response_schema")
    }
    return {**body, "generationConfig": config}


def test_calibrate_on_gemini_recordings_leaves_schema_counting_off():
    fit, held = _gemini_split()
    with_schema = [o for o in fit if "responseSchema" in o.body.get("generationConfig", {})]
    assert with_schema, "the fit set's Gemini calls include structured ones"
    fits = {f.model: f for f in calibrate(fit, held)}
    for o in with_schema:
        profile = fits[o.model].profile if o.model in fits else resolve_model(o.spec)
        counted = estimate_observation(o, profile).input_tokens
        plain = msgspec.structs.replace(o, body=_without_schema(o.body))
        assert counted == estimate_observation(plain, profile).input_tokens, (o.source, o.index)
    # Most of 2.5 Flash's fit calls are flagged (a search tool's results, unsized): the
    # two the bill is far above are not fitted on, and its calibration stays a factor.
    flash = fits["gemini-2.5-flash"]
    assert flash.profile.calibration > 0.5
    assert flash.fit_after["median"] <= flash.fit_before["median"]
    # The Gemini 3 per-content framing is fitted; the tail does not get worse.
    g35 = fits["gemini-3.5-flash"]
    assert "message" in g35.after and g35.before["message"] == 1.6
    assert g35.fit_after["p90"] <= g35.fit_before["p90"]


def test_the_command_prints_each_gemini_models_errors_and_writes_a_loadable_profile(
    tmp_path: Path,
):
    kinds = ("cassette-yaml", "httprr")
    fit = [str(p) for p in files(kind=kinds, wire="gemini", split="fit")]
    held = [str(p) for p in files(kind=kinds, wire="gemini", split="validation")]
    out = tmp_path / "gemini.toml"
    run = _calibrate(*fit, "--validate", *held)
    assert run.returncode == 0, run.stderr
    blocks = run.stdout.split("\ngemini:")[1:]
    models = {b.split()[0]: b for b in blocks}
    assert "gemini-3.5-flash" in models and "gemini-2.5-pro" in models
    for block in models.values():
        lines = [line.split(":", 1) for line in block.splitlines() if ":" in line]
        errors = {k.strip(): v for k, v in lines if k.strip() in ("fit", "validation")}
        assert set(errors) == {"fit", "validation"}, block
        assert "->" in errors["fit"] and "%" in errors["fit"], block
    # The held-out calls of a model are measured before and after the fit.
    pro = dict(line.strip().split(":", 1) for line in models["gemini-2.5-pro"].splitlines()[1:])
    assert pro["validation"].count("%") == 2
    # The per-content framing is fitted for Gemini 3.5, and schema counting stays off:
    # its fit set's tail does not get worse (counting its schemas put it at 38 %).
    g35 = models["gemini-3.5-flash"]
    assert "  message: 1.6 -> " in g35 and "response_schema" not in g35
    fit_line = next(line for line in g35.splitlines() if line.strip().startswith("fit:"))
    before, after = (float(side.split("/")[1]) for side in fit_line.split(":", 1)[1].split("->"))
    assert after <= before
    # The profile written is loaded.
    again = _calibrate(*fit, "--out", str(out), "--json")
    assert again.returncode == 0, again.stderr
    entries = {e.pattern: e for e in read_profile(out)}
    entry = entries["gemini:gemini-3.5-flash"]
    assert entry.estimator and "message" in entry.estimator
    assert "response_schema_text" not in entry.estimator


@pytest.mark.parametrize("wire", sorted(PARAMETERS))
def test_every_fitted_number_moves_the_estimate_linearly(wire: str):
    """The fit reads each number's effect from one nudge: that holds only where the
    estimate is linear in it.  A number whose 0 switches a rule off (as Gemini's
    response schema amount did) breaks it on the requests the rule concerns."""
    kinds = ("cassette-yaml", "httprr")
    obs = [o for o in read_observations(files(kind=kinds, wire=wire, split="fit")) if o.own_model]
    obs = [o for o in obs if o.wire == wire]
    for p in PARAMETERS[wire]:
        for o in obs:
            base = resolve_model(o.spec)
            value = float(base.rule(p.name, 0) or 0) if p.rule else float(getattr(base, p.name))
            at = [
                estimate_observation(o, _with(base, {p.name: value + k * p.step}, [p])).input_tokens
                for k in (0, 1, 2)
            ]
            # Estimates are whole tokens: a step's effect may differ by rounding alone.
            assert abs((at[2] - at[1]) - (at[1] - at[0])) <= 2, (p.name, o.source, o.index, at)


def test_calibrate_finds_gemini_3s_per_content_framing_again():
    """Gemini 3 requests whose bill follows the estimator with 4 tokens a content (the
    built-in profile says 1.6), each with a response schema the model does not bill:
    the fit finds 4 and leaves the schema uncounted."""
    provider = get_provider("gemini")
    base = resolve_model("gemini:gemini-3-flash-preview")
    truth = msgspec.structs.replace(base, estimator={**base.estimator, "message": 4})
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    obs = []
    for i in range(12):
        contents = [
            {"role": "user" if k % 2 == 0 else "model", "parts": [{"text": f"turn {k} " * (i + 1)}]}
            for k in range(2 * (i % 5) + 1)
        ]
        body = {"contents": contents, "generationConfig": {"responseSchema": schema}}
        obs.append(
            Observation(
                source=f"s{i % 3}",
                index=i,
                wire="gemini",
                model="gemini-3-flash-preview",
                body=body,
                usage=Usage(input_tokens=provider.estimate_prompt(body, truth).input_tokens),
                own_model=True,
            )
        )
    (fit,) = calibrate(obs[:9], obs[9:])
    assert fit.before["message"] == 1.6 and abs(fit.after["message"] - 4) < 0.5
    assert "response_schema" not in fit.after
    assert fit.validation_after["p90"] < 0.02 < fit.validation_before["p90"]


def test_a_model_with_few_requests_keeps_its_constants_and_says_why():
    """Three requests cannot support a fit: every number stays the profile's, and the
    fit names each one with the count that fell short."""
    obs = _synthetic(60.0)
    (fit,) = calibrate(obs[:3], obs[9:])
    assert fit.after == {}
    assert fit.kept["tool_block"] == 3 and fit.before["tool_block"] == 33
    assert fit.profile.rule("tool_block") == 33
    assert fit.validation_after == fit.validation_before


def test_a_model_with_enough_requests_still_fits_and_keeps_only_what_they_do_not_support():
    obs = _synthetic(60.0)
    (fit,) = calibrate(obs[:9], obs[9:])
    assert "tool_block" in fit.after and "tool_block" not in fit.kept
    # Nine requests support two numbers: the others they all exercise are kept.
    assert len(fit.after) == 9 // MIN_REQUESTS_PER_NUMBER
    params = {p.name: p for p in PARAMETERS["anthropic"]}
    assert fit.kept and all(_value(fit.profile, params[k]) == fit.before[k] for k in fit.kept)


def test_no_fit_of_the_corpus_has_more_numbers_than_its_requests_support():
    kinds = ("cassette-yaml", "httprr")
    obs = [o for o in read_observations(files(kind=kinds, split="fit")) if o.own_model]
    for fit in calibrate(obs, []):
        assert len(fit.after) * MIN_REQUESTS_PER_NUMBER <= fit.fit_requests, fit.model
        assert not set(fit.after) & set(fit.kept), fit.model


def test_the_command_says_which_numbers_it_kept_and_why():
    """gpt-4.1-nano has three Chat calls in the fit set: the report keeps its numbers,
    saying on how few requests."""
    sources = [str(p) for p in files(kind="cassette-yaml", wire="openai-chat", split="fit")]
    run = _calibrate(*sources)
    assert run.returncode == 0, run.stderr
    block = run.stdout.split("\nopenai-chat:gpt-4.1-nano ")[1].split("\n\n")[0]
    assert "(3 fitted," in block
    numbers = [
        line
        for line in block.splitlines()[1:]
        if not line.strip().startswith(("fit:", "validation:"))
    ]
    assert numbers and all("(kept: only " in line and "->" not in line for line in numbers), block
    assert "  calibration: " in block and "(kept: only 3 requests)" in block
