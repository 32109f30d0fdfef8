"""Plugin loading and the registries built from the register hooks.

Loading is lazy and happens once per process: the first registry lookup loads the
entry points of group ``ctxrules`` — every third-party plugin, and of the built-ins only
those that register the kind asked for (``BUILTIN_KINDS``); the other built-ins load when
their kind is first asked for.  Counting tokens therefore never imports the importers,
the rules or the providers.  Entry points are read only from the installed
environment — the interpreter's site-packages directories (``installed_paths``) — never
from the working directory or another ``sys.path`` entry, so a directory holding a
stray ``*.dist-info`` cannot inject code by being the current directory.

Built-ins are the ``ctxrules.<kind>._plugin`` modules of the ctxrules package that is
imported; they always load, whichever distribution declares them.  Third-party entry
points load according to ``CTXRULES_LOAD_PLUGINS``: unset loads all; set, it is a
comma-separated allow-list of entry-point or distribution names, and the empty string
loads none.  An allow-list entry that matches no installed plugin is warned about
(``PluginWarning``), naming the plugins that are installed.
"""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import os
import re
import site
import sys
import sysconfig
import threading
import warnings
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from .. import hookspecs
from ..errors import PluginError, PluginWarning

__all__ = [
    "BUILTIN_KINDS",
    "ENV_ALLOW_LIST",
    "EVENT_HOOKS",
    "KINDS",
    "LoadedPlugin",
    "Registry",
    "call_hook",
    "get_plugin_manager",
    "installed_paths",
    "loaded_plugins",
    "registry",
    "reset",
]

ENV_ALLOW_LIST = "CTXRULES_LOAD_PLUGINS"
#: Plugin kind → the hook that registers it.
KINDS: dict[str, str] = {
    "tokenizers": "register_tokenizers",
    "models": "register_models",
    "rules": "register_rules",
    "providers": "register_providers",
    "summarizers": "register_summarizers",
    "context_sources": "register_context_sources",
    "importers": "register_importers",
}
#: The kinds each built-in plugin registers: its module (and the package behind it) is
#: imported only once one of them is asked for.  A built-in not listed loads with the
#: first lookup of any kind.  tests/plugins/test_registry.py checks this table against
#: the hooks each module implements.
BUILTIN_KINDS: dict[str, tuple[str, ...]] = {
    "builtin_tokenizers": ("tokenizers",),
    "builtin_rules": ("rules",),
    "builtin_summarizers": ("summarizers",),
    "builtin_importers": ("importers",),
    "builtin_providers": ("providers", "models"),
    "builtin_context_sources": ("context_sources",),
}
#: The event hooks (one ``event`` struct argument each; see ``ctxrules.hookspecs``).
EVENT_HOOKS: tuple[str, ...] = ("pre_compact", "session_start", "post_compact")
# An entry point is a built-in when it names one of these modules (no attribute).
_BUILTIN_MODULE = re.compile(r"ctxrules\.[a-z][a-z0-9_]*\._plugin")
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


@dataclass
class LoadedPlugin:
    """One plugin that loaded: entry-point name, distribution, and hooks it implements."""

    name: str
    distribution: str
    version: str
    hooks: list[str]
    builtin: bool


@dataclass
class Registry:
    """Named objects of one plugin kind, in registration order.

    ``origin`` maps each name to the plugin that registered it; ``builtin_plugins``
    names the built-in plugins, for kinds whose lookups rank built-in entries after
    third-party ones.  ``memo`` holds what a kind's module derives from the registry
    once (e.g. the models' precedence table); it is dropped with the registry.
    """

    kind: str
    items: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    builtin_plugins: frozenset[str] = frozenset()
    memo: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, expected: type | None = None) -> Any:
        """Return the object registered as ``name``; ``PluginError`` lists the known names.

        With ``expected`` (a class or runtime-checkable Protocol), an object that is not
        one is a ``PluginError`` naming the plugin that registered it.
        """
        what = self.kind[:-1].replace("_", " ")
        try:
            obj = self.items[name]
        except KeyError:
            known = ", ".join(sorted(self.items)) or "none"
            raise PluginError(
                f"no {what} named {name!r}",
                hint=f"known: {known}; install the plugin that provides it "
                f"or check {ENV_ALLOW_LIST}",
            ) from None
        if expected is None:
            return obj
        # Checked once per name and type: an ``isinstance`` against a runtime-checkable
        # Protocol walks its members (a session's context sources are looked up on its
        # first request); a registered object does not change what it is.
        checked: dict[tuple[str, type], Any] = self.memo.setdefault("checked", {})
        if checked.get((name, expected)) is obj:
            return obj
        if not isinstance(obj, expected):
            raise PluginError(
                f"{what} {name!r} is a {type(obj).__name__}, not a "
                f"{expected.__module__}.{expected.__qualname__}",
                where=f"plugin {self.origin[name]!r}",
                hint=f"register objects that follow {expected.__qualname__} "
                f"through {KINDS[self.kind]}",
            )
        checked[(name, expected)] = obj
        return obj

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self.items)

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` was registered by a built-in plugin."""
        return self.origin.get(name) in self.builtin_plugins

    def __contains__(self, name: object) -> bool:
        return name in self.items


_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_loaded: list[LoadedPlugin] = []
_registries: dict[str, Registry] = {}
#: The built-in entry points not loaded yet (the kinds they register not asked for).
_pending: list[_Entry] = []


def installed_paths() -> list[str]:
    """The directories whose distributions are "installed": the interpreter's site-packages.

    That is ``site.getsitepackages()``, the user site directory when it is enabled, and
    ``sysconfig``'s purelib/platlib; ``""``, the working directory and other
    ``sys.path`` entries (``PYTHONPATH``, a script's directory) are not included.
    """
    candidates: list[str] = []
    if hasattr(site, "getsitepackages"):  # absent in some embedded interpreters
        candidates += site.getsitepackages()
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    paths = sysconfig.get_paths()
    candidates += [paths["purelib"], paths["platlib"]]
    out: list[str] = []
    for p in candidates:
        if p and os.path.isdir(p) and p not in out:
            out.append(p)
    return out


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _allow_list() -> set[str] | None:
    raw = os.environ.get(ENV_ALLOW_LIST)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _in_package(module: ModuleType) -> bool:
    path = getattr(module, "__file__", None)
    return path is not None and Path(path).resolve().is_relative_to(_PACKAGE_DIR)


@dataclass
class _Entry:
    ep: importlib_metadata.EntryPoint
    dist_name: str
    version: str
    builtin: bool


def _entries() -> list[_Entry]:
    """Entry points of group ``ctxrules`` of every installed distribution, built-ins first."""
    out: list[_Entry] = []
    # distributions(path=...) does not merge distributions of the same name, so a second
    # copy of ctxrules cannot hide the built-ins of the first.
    for dist in importlib_metadata.distributions(path=installed_paths()):
        name = dist.metadata["Name"] or "?"
        for ep in dist.entry_points.select(group=hookspecs.PROJECT):
            builtin = _BUILTIN_MODULE.fullmatch(ep.value) is not None
            out.append(_Entry(ep, name, dist.version or "", builtin))
    return sorted(out, key=lambda e: (not e.builtin, e.ep.name))


def _warn_unmatched(allowed: set[str], entries: list[_Entry]) -> None:
    known = {_normalize(e.ep.name) for e in entries} | {_normalize(e.dist_name) for e in entries}
    missing = sorted(a for a in allowed if _normalize(a) not in known)
    if not missing:
        return
    third = sorted({f"{e.ep.name} ({e.dist_name})" for e in entries if not e.builtin})
    warnings.warn(
        f"{ENV_ALLOW_LIST} names {', '.join(map(repr, missing))}, which "
        f"{'match' if len(missing) > 1 else 'matches'} no installed plugin; installed "
        f"plugins: {', '.join(third) or 'none besides the built-ins'}",
        PluginWarning,
        stacklevel=3,
    )


def get_plugin_manager(kinds: Collection[str] | None = None) -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading entry points on first use.

    ``kinds`` are the plugin kinds about to be used: the built-ins that register other
    kinds stay unloaded until those are asked for; ``None`` loads every plugin.
    """
    global _pm
    with _lock:
        if _pm is None:
            _pm = _start()
        _load_builtins(_pm, kinds)
        return _pm


def _start() -> pluggy.PluginManager:
    """A plugin manager with every allowed third-party plugin and the built-ins kept
    aside for later (``_pending``)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    entries = _entries()
    if not any(e.builtin for e in entries):
        raise PluginError(
            "ctxrules's built-in plugins are not installed: no entry point of group "
            f"'ctxrules' names a ctxrules.*._plugin module in {', '.join(installed_paths())}",
            where=sys.executable,
            hint="install ctxrules into this interpreter (pip install ctxrules, "
            "or `make setup` in a checkout)",
        )
    allowed = _allow_list()
    if allowed:
        _warn_unmatched(allowed, entries)
    allowed_dists = {_normalize(a) for a in allowed or ()}
    values: dict[str, str] = {}  # plugin name → the module it names
    _loaded.clear()
    _pending.clear()
    for e in entries:
        ep = e.ep
        if not e.builtin and allowed is not None:
            if (
                _normalize(ep.name) not in allowed_dists
                and _normalize(e.dist_name) not in allowed_dists
            ):
                continue
        if ep.name in values:
            if values[ep.name] == ep.value:
                continue  # the same plugin declared by two copies of a distribution
            raise PluginError(
                f"two plugins are named {ep.name!r}: {values[ep.name]} and {ep.value} "
                f"(from {e.dist_name})",
                hint="uninstall one of them, or leave one out of " + ENV_ALLOW_LIST,
            )
        values[ep.name] = ep.value
        if e.builtin and ep.name in BUILTIN_KINDS:
            _pending.append(e)
        else:
            _register(pm, e)
    _check(pm)
    return pm


def _load_builtins(pm: pluggy.PluginManager, kinds: Collection[str] | None) -> None:
    """Load the pending built-ins that register one of ``kinds`` (all for ``None``)."""
    due = [e for e in _pending if kinds is None or set(BUILTIN_KINDS[e.ep.name]) & set(kinds)]
    for e in due:
        _pending.remove(e)
        _register(pm, e)
    if due:
        _check(pm)


def _register(pm: pluggy.PluginManager, e: _Entry) -> None:
    ep = e.ep
    try:
        module = ep.load()
    except Exception as exc:  # a broken third-party plugin must say who it is
        raise PluginError(
            f"plugin {ep.name!r} from {e.dist_name} failed to import: {exc}",
            hint=f"fix or uninstall it, or leave it out of {ENV_ALLOW_LIST}",
        ) from exc
    if e.builtin and not _in_package(module):
        raise PluginError(
            f"built-in plugin {ep.name!r} ({ep.value}) does not come from the "
            f"ctxrules package in {_PACKAGE_DIR}",
            hint="reinstall ctxrules; another copy of it shadows this one",
        )
    pm.register(module, name=ep.name)
    hooks = sorted(h.name for h in pm.get_hookcallers(module) or [])
    _loaded.append(LoadedPlugin(ep.name, e.dist_name, e.version, hooks, e.builtin))


def _check(pm: pluggy.PluginManager) -> None:
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            f"a plugin implements a hook that does not exist: {exc}",
            hint="check the hook name against ctxrules.hookspecs",
        ) from exc


def loaded_plugins() -> list[LoadedPlugin]:
    """Every plugin, built-ins included (all are loaded), built-ins first."""
    get_plugin_manager()
    return sorted(_loaded, key=lambda p: (not p.builtin, p.name))


def registry(kind: str) -> Registry:
    """Return the registry of one plugin kind, calling its register hook once."""
    if kind not in KINDS:
        raise PluginError(f"unknown plugin kind {kind!r}", hint=f"one of {', '.join(KINDS)}")
    with _lock:
        reg = _registries.get(kind)
        if reg is not None:
            return reg
        pm = get_plugin_manager((kind,))
        reg = Registry(kind, builtin_plugins=frozenset(p.name for p in _loaded if p.builtin))
        hook = getattr(pm.hook, KINDS[kind])
        # Built-ins first, then third-party plugins in load order (a built-in loaded
        # later, when its kind was first asked for, still comes first).
        impls = sorted(hook.get_hookimpls(), key=lambda i: i.plugin_name not in reg.builtin_plugins)
        for impl in impls:
            plugin_name = impl.plugin_name

            def register(obj: Any, _plugin: str = plugin_name) -> None:
                name = getattr(obj, "name", None)
                if not isinstance(name, str) or not name:
                    raise PluginError(
                        f"plugin {_plugin!r} registered a {kind[:-1]} without a 'name'",
                        hint="give the registered object a non-empty str attribute 'name'",
                    )
                if name in reg.items:
                    raise PluginError(
                        f"{kind[:-1]} {name!r} registered twice: "
                        f"by {reg.origin[name]!r} and {_plugin!r}",
                        hint=f"rename one, or leave one plugin out of {ENV_ALLOW_LIST}",
                    )
                reg.items[name] = obj
                reg.origin[name] = _plugin

            impl.function(register=register)
        _registries[kind] = reg
        return reg


def call_hook(name: str, event: Any) -> list[Any]:
    """Call event hook ``name`` with ``event``; returns every implementation's result, in
    load order (``None`` results included).

    An implementation that raises is a ``PluginError`` naming the plugin and the hook
    (the ``CtxrulesError`` it raised is kept as the cause).
    """
    if name not in EVENT_HOOKS:
        raise PluginError(f"unknown event hook {name!r}", hint=f"one of {', '.join(EVENT_HOOKS)}")
    pm = get_plugin_manager(None)
    results: list[Any] = []
    for impl in getattr(pm.hook, name).get_hookimpls():  # in load order, like the registries
        try:
            results.append(impl.function(event=event))
        except Exception as exc:  # a plugin's failure must name the plugin
            raise PluginError(
                f"plugin {impl.plugin_name!r} failed in {name}: {type(exc).__name__}: {exc}",
                hint=f"fix or uninstall it, or leave it out of {ENV_ALLOW_LIST}",
            ) from exc
    return results


def reset() -> None:
    """Forget loaded plugins and registries; the next lookup loads entry points again."""
    global _pm
    with _lock:
        _pm = None
        _loaded.clear()
        _pending.clear()
        _registries.clear()
