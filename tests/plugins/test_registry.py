"""The plugin system: entry-point discovery (installed distributions only), built-ins
identified by their module, the allow-list and its warning, lazy single loading,
misspelt hooks, duplicate names, and the meta-test that every hook is documented and
exercised through a real entry point (register hooks by a registry lookup, event hooks
by the flow that calls them)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import typing
import warnings
from pathlib import Path

import pytest

import ctxrules
from ctxrules import hookspecs, plugins
from ctxrules.errors import PluginError, PluginWarning

REPO = Path(__file__).resolve().parents[2]
HOOKS = sorted(
    name
    for name, fn in vars(hookspecs).items()
    if callable(fn) and getattr(fn, "ctxrules_spec", None) is not None
)
BUILTINS = {
    "builtin_context_sources",
    "builtin_importers",
    "builtin_providers",
    "builtin_rules",
    "builtin_summarizers",
    "builtin_tokenizers",
}


REGISTER_HOOKS = sorted(plugins.KINDS.values())


def test_hooks_exist_for_every_plugin_kind_and_event():
    assert sorted([*REGISTER_HOOKS, *plugins.EVENT_HOOKS]) == HOOKS
    assert "register_models" in HOOKS and "pre_compact" in HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_exact_signature(hook):
    fn = getattr(hookspecs, hook)
    signature = str(inspect.signature(fn)).replace("'", "")
    docs = (REPO / "docs" / "plugins.md").read_text()
    assert f"## `{hook}{signature}`" in docs
    assert fn.__doc__
    if hook in plugins.EVENT_HOOKS:  # one struct argument, and the doc says who calls it
        (param,) = inspect.signature(fn).parameters.values()
        assert param.name == "event" and "Called by" in fn.__doc__
    else:
        assert "Called once" in fn.__doc__


REGISTER_TYPES = {
    h: inspect.signature(getattr(hookspecs, h)).parameters["register"].annotation
    for h in REGISTER_HOOKS
}


@pytest.mark.parametrize("hook", REGISTER_HOOKS)
def test_every_register_callback_has_its_own_type(hook):
    """Each hook's ``register`` is typed for its kind, not ``Callable[[Any], None]``."""
    (arg,), result = typing.get_args(getattr(hookspecs, REGISTER_TYPES[hook]))
    assert result is None and "Any" not in repr(arg)
    assert list(REGISTER_TYPES.values()).count(REGISTER_TYPES[hook]) == 1


def test_mypy_refuses_an_object_of_the_wrong_kind(tmp_path):
    """The types are real: registering a provider through the rules hook fails mypy."""
    mypy = pytest.importorskip("mypy.api")
    src = tmp_path / "wrong_kind.py"
    src.write_text(
        "from ctxrules.hookspecs import RegisterRules, hookimpl\n"
        "from ctxrules.providers.anthropic import AnthropicProvider\n"
        "from ctxrules.rules import ToolAging\n\n"
        "@hookimpl\n"
        "def register_rules(register: RegisterRules) -> None:\n"
        "    register(ToolAging)\n"
        "    register(AnthropicProvider())\n"
    )
    out, _, status = mypy.run(
        [str(src), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"]
    )
    assert status == 1
    (error,) = out.splitlines()
    assert ":8: error: Argument 1 has incompatible type" in error and "Rule" in error


@pytest.mark.parametrize("kind,hook", sorted(plugins.KINDS.items()))
def test_every_hook_is_called_and_its_registrations_land(plugin_site, kind, hook):
    plugin_site.install(
        "fake-every",
        "fake_every",
        f"""
        from ctxrules.hookspecs import hookimpl

        class Thing:
            name = "fake-{kind}"

        @hookimpl
        def {hook}(register):
            register(Thing())
        """,
    )
    reg = plugins.registry(kind)
    assert f"fake-{kind}" in reg
    assert reg.origin[f"fake-{kind}"] == "fake-every"
    assert not reg.is_builtin(f"fake-{kind}")


def test_example_plugin_package_is_discovered_through_its_entry_point(fresh_plugins):
    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    loaded = {p.name: p for p in plugins.loaded_plugins()}
    assert "example" in loaded, "plugins/ctxrules-example must be installed (make setup)"
    assert loaded["example"].distribution == "ctxrules-example"
    assert not loaded["example"].builtin
    assert loaded["example"].hooks == ["register_models", "register_tokenizers"]
    tok = plugins.registry("tokenizers").get("chars4")
    assert tok.count("abcdefghi") == 3
    profile = ctxrules.resolve_model("example:any")
    assert (profile.tokenizer, profile.context_window) == ("chars4", 32_000)
    assert profile.estimate_tokens(["abcdefghi", "abcd"]) == 3 + 1


def test_empty_allow_list_loads_no_third_party_plugin_but_all_builtins(fresh_plugins):
    fresh_plugins.setenv(plugins.ENV_ALLOW_LIST, "")
    loaded = plugins.loaded_plugins()
    assert all(p.builtin for p in loaded)
    assert {p.name for p in loaded} == BUILTINS
    assert "chars4" not in plugins.registry("tokenizers")


def test_allow_list_by_distribution_or_entry_point_name(plugin_site, monkeypatch):
    plugin_site.install("fake-a", "fake_a", "X = 1\n")
    plugin_site.install("fake-b", "fake_b", "X = 2\n", ep_name="bee")
    # An entry-point name, and a distribution name spelt with an underscore.
    monkeypatch.setenv(plugins.ENV_ALLOW_LIST, " fake-a , ctxrules_example")
    names = {p.name for p in plugins.loaded_plugins()}
    assert {"fake-a", "example"} <= names and "bee" not in names


def test_an_allow_list_entry_matching_nothing_warns_with_the_installed_names(
    plugin_site, monkeypatch
):
    plugin_site.install("fake-b", "fake_b", "X = 2\n", ep_name="bee")
    monkeypatch.setenv(plugins.ENV_ALLOW_LIST, "bee,redact-secret")  # misspelt dist name
    with pytest.warns(PluginWarning, match="'redact-secret'") as record:
        names = {p.name for p in plugins.loaded_plugins()}
    assert "bee" in names and "redact_secrets" not in names
    (warning,) = record
    text = str(warning.message)
    assert "'bee'" not in text  # only the entry that matched nothing is named
    assert "redact_secrets (ctxrules-redact-secrets)" in text and "bee (fake-b)" in text


def test_entry_point_names_match_however_they_are_spelt(plugin_site, monkeypatch):
    """``redact-secrets`` names the entry point ``redact_secrets``, as pip spells names."""
    monkeypatch.setenv(plugins.ENV_ALLOW_LIST, "redact-secrets")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        names = {p.name for p in plugins.loaded_plugins()}
    assert "redact_secrets" in names


def test_several_unmatched_entries_are_named_in_one_sentence(plugin_site, monkeypatch):
    monkeypatch.setenv(plugins.ENV_ALLOW_LIST, "nope-a,nope-b")
    with pytest.warns(PluginWarning, match=r"'nope-a', 'nope-b', which match no installed"):
        plugins.loaded_plugins()


def test_the_cli_prints_that_warning_on_one_line():
    env = {**os.environ, plugins.ENV_ALLOW_LIST: "no-such-plugin"}
    out = subprocess.run(
        [sys.executable, "-m", "ctxrules", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("ctxrules plugins: warning: CTXRULES_LOAD_PLUGINS names")
    assert "'no-such-plugin'" in line and "example (ctxrules-example)" in line
    assert {r["name"] for r in json.loads(out.stdout)} == BUILTINS


def test_the_listing_shows_models_as_their_own_group(fresh_plugins, capsys):
    from ctxrules.cli import main

    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    assert main(["plugins", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    provides = rows["builtin_providers"]["provides"]
    assert provides["providers"] == ["anthropic", "openai-chat", "openai-responses", "gemini"]
    assert {"anthropic-default", "claude-opus-4-5", "gpt-4.1", "gemini-2.5"} <= set(
        provides["models"]
    )
    assert rows["example"]["provides"] == {"tokenizers": ["chars4"], "models": ["example-models"]}
    assert main(["plugins"]) == 0
    text = capsys.readouterr().out
    models = text.split("\nmodels (")[1].split("\nplugins (")[0]
    assert "\n    example: example-models\n" in models + "\n"
    providers = text.split("\nproviders (4)\n")[1].split("\nimporters (")[0]
    assert providers == (
        "    builtin_providers (built-in): anthropic, openai-chat, openai-responses, gemini"
    )


# ``python -c`` puts "" (the working directory) first on sys.path, ``-m`` its full path.
_PRINT_PLUGINS = "from ctxrules.cli import main; raise SystemExit(main(['plugins', '--json']))"


def test_a_fake_ctxrules_dist_info_in_the_working_directory_runs_nothing(tmp_path):
    """A directory holding ``ctxrules-9.9.dist-info`` whose entry points name a module in
    that directory: run from there, its code does not run and the real built-ins load."""
    info = tmp_path / "ctxrules-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxrules\nVersion: 9.9\n")
    (info / "entry_points.txt").write_text(
        "[ctxrules]\nbuiltin_rules = fake_builtin\nbuiltin_tokenizers = fake_builtin\n"
    )
    (tmp_path / "fake_builtin.py").write_text(
        "import pathlib\npathlib.Path('FAKE_CODE_RAN').write_text('yes')\n"
    )
    env = {**os.environ, plugins.ENV_ALLOW_LIST: ""}
    for argv in (["-m", "ctxrules", "plugins", "--json"], ["-c", _PRINT_PLUGINS]):
        out = subprocess.run(
            [sys.executable, *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert not (tmp_path / "FAKE_CODE_RAN").exists()
        rows = {r["name"]: r for r in json.loads(out.stdout)}
        assert set(rows) == BUILTINS
        assert {r["distribution"] for r in rows.values()} == {"ctxrules"}
        assert "result_cap" in rows["builtin_rules"]["provides"]["rules"]
        assert "o200k_base" in rows["builtin_tokenizers"]["provides"]["tokenizers"]


def test_dist_infos_on_sys_path_outside_site_packages_are_not_read(tmp_path, fresh_plugins):
    info = tmp_path / "fake_onpath-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-onpath\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ctxrules]\nonpath = fake_onpath\n")
    (tmp_path / "fake_onpath.py").write_text("X = 1\n")
    fresh_plugins.syspath_prepend(str(tmp_path))
    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    assert "onpath" not in {p.name for p in plugins.loaded_plugins()}
    assert "fake_onpath" not in sys.modules
    assert str(tmp_path) not in plugins.installed_paths()


def test_builtins_are_known_by_their_module_not_their_distribution(plugin_site, monkeypatch):
    """An installed distribution that calls itself ``ctxrules`` but names a module of its
    own is third-party: the allow-list applies to it and it is not marked built-in."""
    plugin_site.install("ctxrules", "fake_impostor", "X = 1\n", ep_name="builtin_extra")
    monkeypatch.setenv(plugins.ENV_ALLOW_LIST, "")
    assert {p.name for p in plugins.loaded_plugins()} == BUILTINS
    assert "fake_impostor" not in sys.modules
    plugins.reset()
    monkeypatch.delenv(plugins.ENV_ALLOW_LIST)
    loaded = {p.name: p for p in plugins.loaded_plugins()}
    assert loaded["builtin_extra"].builtin is False
    assert {n for n, p in loaded.items() if p.builtin} == BUILTINS


def test_without_the_builtins_installed_loading_says_so(tmp_path, fresh_plugins):
    fresh_plugins.setattr(plugins, "installed_paths", lambda: [str(tmp_path)])
    with pytest.raises(PluginError, match="built-in plugins are not installed"):
        plugins.get_plugin_manager()


def test_two_different_plugins_of_one_name_are_an_error(plugin_site):
    plugin_site.install("fake-one", "fake_one", "X = 1\n", ep_name="twin")
    plugin_site.install("fake-two", "fake_two", "X = 2\n", ep_name="twin")
    with pytest.raises(PluginError, match=r"two plugins are named 'twin'"):
        plugins.get_plugin_manager()


def test_misspelt_hook_is_refused_at_load(plugin_site):
    plugin_site.install(
        "fake-typo",
        "fake_typo",
        """
        from ctxrules.hookspecs import hookimpl

        @hookimpl
        def register_rule(register):
            pass
        """,
    )
    with pytest.raises(PluginError, match="register_rule"):
        plugins.get_plugin_manager()


def test_broken_plugin_names_itself(plugin_site):
    plugin_site.install("fake-broken", "fake_broken", "raise RuntimeError('boom')\n")
    with pytest.raises(PluginError, match=r"fake-broken.*boom"):
        plugins.get_plugin_manager()


def test_duplicate_names_are_an_error_naming_both_plugins(plugin_site):
    body = """
        from ctxrules.hookspecs import hookimpl

        class T:
            name = "o200k_base"
            def count(self, text): return 0
            def count_batch(self, texts): return [0] * len(texts)

        @hookimpl
        def register_tokenizers(register):
            register(T())
        """
    plugin_site.install("fake-dup", "fake_dup", body)
    with pytest.raises(PluginError, match=r"registered twice.*builtin_tokenizers.*fake-dup"):
        plugins.registry("tokenizers")


def test_nameless_registration_is_refused(plugin_site):
    plugin_site.install(
        "fake-nameless",
        "fake_nameless",
        """
        from ctxrules.hookspecs import hookimpl

        @hookimpl
        def register_providers(register):
            register(object())
        """,
    )
    with pytest.raises(PluginError, match="without a 'name'"):
        plugins.registry("providers")


def test_register_hook_runs_once_per_process(plugin_site):
    plugin_site.install(
        "fake-once",
        "fake_once",
        """
        from ctxrules.hookspecs import hookimpl
        CALLS = []

        @hookimpl
        def register_summarizers(register):
            CALLS.append(1)
        """,
    )
    plugins.registry("summarizers")
    plugins.registry("summarizers")
    assert sys.modules["fake_once"].CALLS == [1]


def test_unknown_name_lists_the_known_ones(fresh_plugins):
    with pytest.raises(PluginError, match=r"no tokenizer named 'nope'.*o200k_base"):
        plugins.registry("tokenizers").get("nope")


def test_importing_ctxrules_loads_no_plugin():
    code = "import ctxrules, ctxrules.plugins as p; print(p._pm is None)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr


def test_every_event_hook_is_called_through_a_real_entry_point(plugin_site, tmp_path, corpus):
    """A plugin installed as a distribution implements every event hook; a compaction
    of a real session calls each once with its struct, and uses what they return."""
    plugin_site.install(
        "fake-events",
        "fake_events",
        """
        from ctxrules.hookspecs import hookimpl

        SEEN = []

        @hookimpl
        def pre_compact(event):
            SEEN.append(("pre_compact", event))
            return "HOOK-INSTRUCTION keep the todo list"

        @hookimpl
        def session_start(event):
            SEEN.append(("session_start", event))
            return "HOOK-CONTEXT re-read CONTRIBUTING.md"

        @hookimpl
        def post_compact(event):
            SEEN.append(("post_compact", event))
        """,
    )
    from ctxrules.compaction import (
        PostCompactEvent,
        PreCompactEvent,
        SessionStartEvent,
        compact,
    )
    from ctxrules.importers import import_paths
    from ctxrules.store import open_store

    store = open_store(str(tmp_path / "store"), create=True)
    path = corpus / "claude-code-jsonl" / "ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    (imported,) = import_paths(store, [str(path)])
    head = store.get_session(imported.id).head
    result = compact(store, imported.id, now=2_000_000_000.0, working_directory=str(tmp_path))
    seen = sys.modules["fake_events"].SEEN
    assert [name for name, _ in seen] == list(plugins.EVENT_HOOKS)
    types = {"pre_compact": PreCompactEvent, "session_start": SessionStartEvent}
    types["post_compact"] = PostCompactEvent
    assert all(type(event) is types[name] for name, event in seen)
    pre, start, post = (event for _, event in seen)
    assert (pre.session_id, pre.head, pre.trigger) == (imported.id, head, "manual")
    assert pre.tokens_before == result.record.tokens_before
    assert (start.source, start.boundary) == ("compact", result.boundary)
    assert post.result == result
    # what they returned: the instruction is in the record, the context in the restore
    assert "HOOK-INSTRUCTION keep the todo list" in result.record.instructions
    assert result.restored.hook_context
    restore = store.get_node(result.restore)
    assert "HOOK-CONTEXT re-read CONTRIBUTING.md" in restore.output
    store.close()


def test_a_failing_event_hook_names_its_plugin_and_stops_the_compaction(plugin_site, tmp_path):
    plugin_site.install(
        "fake-broken-hook",
        "fake_broken_hook",
        """
        from ctxrules.hookspecs import hookimpl

        @hookimpl
        def pre_compact(event):
            raise RuntimeError("hook exploded")
        """,
    )
    from ctxrules import dag
    from ctxrules.compaction import compact
    from ctxrules.store import open_store

    store = open_store(str(tmp_path / "store"), create=True)
    info = dag.create_session(store)
    for k in range(3):
        dag.append(store, info.id, "user", f"question {k} " * 200)
        dag.append(store, info.id, "assistant", f"answer {k} " * 200)
    before = store.nodes(info.id)
    with pytest.raises(PluginError, match=r"fake-broken-hook.*pre_compact.*hook exploded"):
        compact(store, info.id, now=1.0)
    assert store.nodes(info.id) == before  # nothing appended
    store.close()


def test_each_builtin_registers_exactly_the_kinds_the_lazy_table_says(fresh_plugins):
    loaded = {p.name: p for p in plugins.loaded_plugins() if p.builtin}
    assert set(loaded) == set(plugins.BUILTIN_KINDS)
    for name, kinds in plugins.BUILTIN_KINDS.items():
        assert sorted(loaded[name].hooks) == sorted(plugins.KINDS[k] for k in kinds), name


def test_counting_tokens_imports_none_of_the_other_builtin_plugins():
    code = (
        "import sys, ctxrules\n"
        "from ctxrules.tokenizers import get_tokenizer\n"
        "get_tokenizer('cl100k_base').count('hi')\n"
        "print(sorted(m for m in sys.modules if m.startswith('ctxrules.')))"
    )
    env = {**os.environ, plugins.ENV_ALLOW_LIST: ""}  # the built-ins only
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    loaded = eval(out.stdout)
    assert "ctxrules.tokenizers._plugin" in loaded
    for heavy in ("importers", "rules", "providers", "summarizers", "commit", "store"):
        assert not [m for m in loaded if m.startswith(f"ctxrules.{heavy}")], heavy


def test_a_builtin_loaded_late_still_comes_before_third_party_plugins(plugin_site):
    plugin_site.install(
        "ctxrules-zz",
        "fake_zz",
        "from ctxrules.hookspecs import hookimpl\n"
        "class I:\n    name = 'zz'\n"
        "@hookimpl\ndef register_importers(register):\n    register(I())\n",
        ep_name="zz",
    )
    plugins.registry("tokenizers")  # loads the third-party plugin, not the importers
    names = plugins.registry("importers").names()
    assert names[-1] == "zz" and names[0] != "zz"


def test_a_lookup_by_type_refuses_every_time_and_answers_what_is_registered():
    from ctxrules.context_sources import ContextSource

    class Source:
        name = "good"

        def collect(self, request):
            return None

    good, other = Source(), Source()
    reg = plugins.Registry(
        "context_sources",
        items={"good": good, "bad": object()},
        origin={"good": "p", "bad": "q"},
    )
    for _ in range(3):  # the check is kept for what passed it, never for what failed
        assert reg.get("good", ContextSource) is good
        with pytest.raises(PluginError, match=r"context source 'bad' is a object, not a"):
            reg.get("bad", ContextSource)
    reg.items["good"] = other  # (registries are built once; a new object is checked)
    assert reg.get("good", ContextSource) is other
    reg.items["good"] = object()
    with pytest.raises(PluginError, match="not a"):
        reg.get("good", ContextSource)
