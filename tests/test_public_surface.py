"""The public surface: what a rule author, an agent author or a batch user needs is
importable from ``ctxrules`` itself, each name the same object as where it lives, and
every public name is documented."""

from __future__ import annotations

import inspect

import ctxrules
from ctxrules import commit, config, providers, render, replay, rules, store

# What the people who build on the library reach for, and where each lives.
EXPECTED = {
    "derive_commit": commit,
    "derive_with_summaries": commit,
    "ensure_latest_commit": commit,
    "generate_commit": commit,
    "load_commit": commit,
    "diff_commits": commit,
    "Pipeline": commit,
    "RuleContext": commit,
    "PipelineConfig": config,
    "PRESETS": config,
    "load_config": config,
    "find_config": config,
    "open_store": store,
    "Store": store,
    "CommitStore": store,
    "Rule": rules,
    "resolve_model": providers,
    "ModelProfile": providers,
    "get_provider": providers,
    "Provider": providers,
    "Usage": providers,
    "render_request": render,
    "render_batch": render,
    "render_sessions": render,
    "render_commit": render,
    "render_context": render,
    "explain": render,
    "request_for": replay,
    "next_request": replay,
    "session_requests": replay,
    "render_requests": replay,
}


def test_the_names_people_build_on_are_public_and_the_same_objects():
    for name, home in EXPECTED.items():
        assert name in ctxrules.__all__, name
        assert getattr(ctxrules, name) is getattr(home, name), name


def test_everything_listed_exists_and_is_documented():
    for name in ctxrules.__all__:
        obj = getattr(ctxrules, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_the_render_module_stays_reachable():
    # ``ctxrules.render`` names the module (render_request etc. are the functions).
    assert inspect.ismodule(ctxrules.render)
