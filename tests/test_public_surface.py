"""The public surface: a small root that lists what an agent author, a rule author and a
batch user need, each name the same object as where it lives, documented, imported only
when used; the names it used to export still resolve, with a warning naming their home."""

from __future__ import annotations

import inspect
import subprocess
import sys
import warnings

import pytest

import ctxrules
from ctxrules import commit, config, engine, model, providers, requests, ruleapi, store, tokenizers
from ctxrules import render as render_pkg

# Every root name but the submodules, and where it lives.
EXPECTED = {
    "PRESETS": config,
    "CommitStore": store,
    "Context": model,
    "ContextCommit": model,
    "ContextItem": model,
    "Engine": engine,
    "EngineConfig": engine,
    "Message": model,
    "Node": model,
    "PipelineConfig": config,
    "RenderedRequest": providers,
    "Request": requests,
    "Rule": ruleapi,
    "RuleContext": ruleapi,
    "Store": store,
    "ToolResult": engine,
    "count": tokenizers,
    "count_batch": tokenizers,
    "diff_commits": commit,
    "explain": render_pkg,
    "load_config": config,
    "make_commit": commit,
    "open_store": store,
    "render_batch": render_pkg,
    "render_body": render_pkg,
    "render_context": render_pkg,
    "render_messages": render_pkg,
    "render_requests": requests,
    "resolve_model": providers,
    "session_requests": requests,
    "shape": engine,
}


def test_the_root_is_small_and_each_name_is_the_object_at_its_home():
    assert set(ctxrules.__all__) == {*EXPECTED, "__version__", "errors", "render"}
    for name, home in EXPECTED.items():
        assert getattr(ctxrules, name) is getattr(home, name), name


def test_everything_listed_exists_and_is_documented():
    for name in ctxrules.__all__:
        obj = getattr(ctxrules, name)
        if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_render_is_the_package_and_calling_it_renders():
    # The package and the function share a name: the root's ``render`` is the package,
    # callable as its function, so importing ``ctxrules.render`` anywhere changes nothing.
    assert ctxrules.render is render_pkg
    item = model.ContextItem(source_node_id="n_1", role="user", rendered="hi")
    c = model.ContextCommit(
        id="cc_1", session_id="s", head_node_id="n_1", rules_version="", items=(item,)
    )
    assert ctxrules.render(c, "openai-chat").body == render_pkg.render(c, "openai-chat").body


def test_the_version_is_the_extensions():
    assert ctxrules.__version__ == ctxrules._core.__version__
    assert ctxrules.__version__.count(".") == 2


# Old root names: each warns and gives the object at its new home.
DEPRECATED = {
    "Call": model.Node,
    "TextBlock": model.TextBlock,
    "ToolSpec": model.ToolSpec,
    "Pipeline": commit.Pipeline,
    "derive_commit": commit.derive_commit,
    "load_commit": commit.load_commit,
    "find_config": config.find_config,
    "get_provider": providers.get_provider,
    "Provider": providers.Provider,
    "next_request": requests.next_request,
    "request_for": requests.request_for,
    "render_commit": render_pkg.render_messages,
    "render_request": render_pkg.render_body,
    "render_sessions": render_pkg.render_sessions,
}


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_an_old_root_name_warns_and_resolves_to_its_home(name):
    with pytest.warns(DeprecationWarning, match=rf"ctxrules\.{name} is deprecated.*0\.3"):
        got = getattr(ctxrules, name)
    assert got is DEPRECATED[name]


def test_the_old_commit_makers_warn_and_make_the_same_commits(tmp_path):
    st = ctxrules.open_store(str(tmp_path / "s"))
    from ctxrules import dag

    s = dag.create_session(st)
    dag.append(st, s.id, "user", "hi")
    with pytest.warns(DeprecationWarning, match="make_commit"):
        ensure = ctxrules.ensure_latest_commit
    with pytest.warns(DeprecationWarning, match=r"rerun=True"):
        generate = ctxrules.generate_commit
    first = ensure(s.id, now=10.0, store=st)
    assert first == ctxrules.make_commit(s.id, now=99.0, store=st)  # current: the stored one
    again = generate(s.id, now=20.0, store=st)
    assert again.parent_ids == (first.id,)
    st.close()


@pytest.mark.parametrize(
    "old, new",
    [
        ("ctxrules.replay", "ctxrules.requests"),
        ("ctxrules.commit.context", "ctxrules.ruleapi"),
        ("ctxrules.commit.delta", "ctxrules.ruleapi.delta"),
        ("ctxrules.rules.base", "ctxrules.ruleapi"),
    ],
)
def test_an_old_module_warns_on_import(old, new):
    code = (
        "import warnings; warnings.simplefilter('error');\n"
        f"try:\n    import {old}\nexcept DeprecationWarning as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"{old} is deprecated" in out.stdout and f"use {new}" in out.stdout, out


def test_unknown_root_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ctxrules.nope  # noqa: B018


def test_the_rule_api_needs_no_commit_machinery():
    code = "import sys, ctxrules.ruleapi; print(sorted(m for m in sys.modules if 'ctxrules.' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)
    assert "ctxrules.ruleapi" in loaded
    assert not [
        m for m in loaded if m.startswith(("ctxrules.commit", "ctxrules.store", "ctxrules.rules."))
    ]


# What ``import ctxrules`` must not load: test frameworks, plotting, database drivers,
# HTTP clients, and our own heavier layers.
HEAVY = (
    "pytest",
    "hypothesis",
    "matplotlib",
    "psycopg",
    "httpx",
    "requests",
    "urllib3",
    "yaml",
    "rich",
    "tiktoken",
    "ctxrules.commit",
    "ctxrules.engine",
    "ctxrules.render",
    "ctxrules.store",
    "ctxrules.importers",
)


def test_import_ctxrules_loads_only_what_every_use_needs():
    code = "import sys, ctxrules; print(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(eval(out.stdout))
    assert not [m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY], loaded


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["count", "--help"]])
def test_the_cli_starts_without_heavy_imports(argv):
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['ctxrules', *{argv!r}]\n"
        "try:\n    runpy.run_module('ctxrules', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('MODULES', sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(eval(out.stdout.split("MODULES", 1)[1]))
    heavy = {"pytest", "hypothesis", "matplotlib", "psycopg", "httpx", "yaml", "rich", "tiktoken"}
    assert not {m.split(".")[0] for m in loaded} & heavy
    assert "ctxrules.engine" not in loaded and "ctxrules.render" not in loaded


def test_no_warning_from_the_public_names():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ctxrules.__all__:
            getattr(ctxrules, name)


# The agent frameworks and vendor SDKs the integrations adapt: only the adapter a caller
# imports (``ctxrules.integrations.<framework>``) loads its framework.
FRAMEWORKS = (
    "agents",
    "pydantic_ai",
    "langchain",
    "langchain_core",
    "langgraph",
    "claude_agent_sdk",
    "litellm",
    "anthropic",
    "openai",
    "google",
)


def test_the_engine_and_the_integrations_package_load_no_framework():
    code = (
        "import sys, ctxrules, ctxrules.engine, ctxrules.integrations\n"
        "ctxrules.shape([{'role': 'user', 'content': 'hi'}], provider='openai-chat')\n"
        "print(sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m.split(".")[0] for m in eval(out.stdout)}
    assert not loaded & set(FRAMEWORKS), loaded & set(FRAMEWORKS)


def test_an_adapter_without_its_framework_says_which_extra_to_install(tmp_path):
    # The framework hidden (a module that cannot be imported): the adapter names its extra.
    (tmp_path / "litellm.py").write_text("raise ImportError('not installed')\n")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "try:\n    import ctxrules.integrations.litellm\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'ctxrules[litellm]'" in out.stdout
