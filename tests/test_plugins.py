"""The plugin system: entry-point discovery, the allow-list, lazy single loading,
misspelt hooks, duplicate names, and the meta-test that every hook is documented."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxrules import hookspecs, plugins
from ctxrules.errors import PluginError

REPO = Path(__file__).resolve().parent.parent
HOOKS = sorted(
    name
    for name, fn in vars(hookspecs).items()
    if callable(fn) and getattr(fn, "ctxrules_spec", None) is not None
)


def make_dist(root: Path, dist: str, module: str, body: str, ep_name: str | None = None) -> None:
    """Write an installed-looking distribution (dist-info + module) under ``root``."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[ctxrules]\n{ep_name or dist} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(body))


@pytest.fixture
def site(tmp_path, fresh_plugins):
    """A temporary site directory on sys.path; distributions written there are discovered."""
    fresh_plugins.syspath_prepend(str(tmp_path))
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[mod]


def test_hooks_exist_for_every_plugin_kind():
    assert sorted(plugins.KINDS.values()) == HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_exact_signature(hook):
    fn = getattr(hookspecs, hook)
    signature = str(inspect.signature(fn)).replace("'", "")
    docs = (REPO / "docs" / "plugins.md").read_text()
    assert f"## `{hook}{signature}`" in docs
    assert fn.__doc__ and "Called once" in fn.__doc__


@pytest.mark.parametrize("kind,hook", sorted(plugins.KINDS.items()))
def test_every_hook_is_called_and_its_registrations_land(site, kind, hook):
    make_dist(
        site,
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


def test_example_plugin_package_is_discovered_through_its_entry_point(fresh_plugins):
    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    loaded = {p.name: p for p in plugins.loaded_plugins()}
    assert "example" in loaded, "plugins/ctxrules-example must be installed (make setup)"
    assert loaded["example"].distribution == "ctxrules-example"
    assert not loaded["example"].builtin
    assert loaded["example"].hooks == ["register_tokenizers"]
    tok = plugins.registry("tokenizers").get("chars4")
    assert tok.count("abcdefghi") == 3
    from ctxrules.tokenizers import resolve_model

    assert resolve_model("example:any")[0] is tok


def test_empty_allow_list_loads_no_third_party_plugin_but_all_builtins(fresh_plugins):
    fresh_plugins.setenv(plugins.ENV_ALLOW_LIST, "")
    loaded = plugins.loaded_plugins()
    assert all(p.builtin for p in loaded)
    assert "builtin_tokenizers" in {p.name for p in loaded}
    assert "chars4" not in plugins.registry("tokenizers")


def test_allow_list_by_distribution_or_entry_point_name(site):
    make_dist(site, "fake-a", "fake_a", "X = 1\n")
    make_dist(site, "fake-b", "fake_b", "X = 2\n")
    site_env = pytest.MonkeyPatch()
    try:
        site_env.setenv(plugins.ENV_ALLOW_LIST, " fake-a , ctxrules-example")
        names = {p.name for p in plugins.loaded_plugins()}
        assert {"fake-a", "example"} <= names and "fake-b" not in names
    finally:
        site_env.undo()


def test_misspelt_hook_is_refused_at_load(site):
    make_dist(
        site,
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


def test_broken_plugin_names_itself(site):
    make_dist(site, "fake-broken", "fake_broken", "raise RuntimeError('boom')\n")
    with pytest.raises(PluginError, match=r"fake-broken.*boom"):
        plugins.get_plugin_manager()


def test_duplicate_names_are_an_error_naming_both_plugins(site):
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
    make_dist(site, "fake-dup", "fake_dup", body)
    with pytest.raises(PluginError, match=r"registered twice.*builtin_tokenizers.*fake-dup"):
        plugins.registry("tokenizers")


def test_nameless_registration_is_refused(site):
    make_dist(
        site,
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


def test_register_hook_runs_once_per_process(site):
    make_dist(
        site,
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
