"""Plugin loading and the registries built from the register hooks.

Loading is lazy and happens once per process: the first registry lookup loads the
entry points of group ``ctxrules``.  Entry points of the ``ctxrules`` distribution
itself (the built-ins) always load.  Third-party entry points load according to
``CTXRULES_LOAD_PLUGINS``: unset loads all; set, it is a comma-separated allow-list of
entry-point or distribution names, and the empty string loads none.
"""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import pluggy

from .. import hookspecs
from ..errors import PluginError

__all__ = [
    "ENV_ALLOW_LIST",
    "KINDS",
    "LoadedPlugin",
    "Registry",
    "get_plugin_manager",
    "loaded_plugins",
    "registry",
    "reset",
]

ENV_ALLOW_LIST = "CTXRULES_LOAD_PLUGINS"
BUILTIN_DISTRIBUTION = "ctxrules"
#: Plugin kind → the hook that registers it.
KINDS: dict[str, str] = {
    "tokenizers": "register_tokenizers",
    "rules": "register_rules",
    "providers": "register_providers",
    "summarizers": "register_summarizers",
    "context_sources": "register_context_sources",
    "importers": "register_importers",
}


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
    """Named objects of one plugin kind, in registration order."""

    kind: str
    items: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """Return the object registered as ``name``; ``PluginError`` lists the known names."""
        try:
            return self.items[name]
        except KeyError:
            known = ", ".join(sorted(self.items)) or "none"
            raise PluginError(
                f"no {self.kind[:-1].replace('_', ' ')} named {name!r}",
                hint=f"known: {known}; install the plugin that provides it "
                f"or check {ENV_ALLOW_LIST}",
            ) from None

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self.items)

    def __contains__(self, name: object) -> bool:
        return name in self.items


_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_loaded: list[LoadedPlugin] = []
_registries: dict[str, Registry] = {}


def _allowed(ep_name: str, dist_name: str) -> bool:
    raw = os.environ.get(ENV_ALLOW_LIST)
    if raw is None:
        return True
    allowed = {part.strip() for part in raw.split(",") if part.strip()}
    return ep_name in allowed or dist_name in allowed


def get_plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading entry points on first use."""
    global _pm
    with _lock:
        if _pm is not None:
            return _pm
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        loaded: list[LoadedPlugin] = []
        # Built-ins first, then third-party plugins by name: registration order is stable.
        entries = []
        for ep in importlib_metadata.entry_points(group=hookspecs.PROJECT):
            dist = ep.dist
            dist_name = dist.metadata["Name"] if dist is not None else "?"
            entries.append((dist_name != BUILTIN_DISTRIBUTION, ep.name, ep, dist_name))
        for third_party, _, ep, dist_name in sorted(entries, key=lambda e: e[:2]):
            dist = ep.dist
            builtin = not third_party
            if not builtin and not _allowed(ep.name, dist_name):
                continue
            if pm.get_plugin(ep.name) is not None:
                continue  # the same distribution installed twice on sys.path
            try:
                module = ep.load()
            except Exception as exc:  # a broken third-party plugin must say who it is
                raise PluginError(
                    f"plugin {ep.name!r} from {dist_name} failed to import: {exc}",
                    hint=f"fix or uninstall it, or leave it out of {ENV_ALLOW_LIST}",
                ) from exc
            pm.register(module, name=ep.name)
            hooks = sorted(h.name for h in pm.get_hookcallers(module) or [])
            loaded.append(
                LoadedPlugin(
                    name=ep.name,
                    distribution=dist_name,
                    version=dist.version if dist is not None else "",
                    hooks=hooks,
                    builtin=builtin,
                )
            )
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                f"a plugin implements a hook that does not exist: {exc}",
                hint="check the hook name against ctxrules.hookspecs",
            ) from exc
        _loaded[:] = loaded
        _pm = pm
        return pm


def loaded_plugins() -> list[LoadedPlugin]:
    """The plugins that loaded, built-ins included."""
    get_plugin_manager()
    return list(_loaded)


def registry(kind: str) -> Registry:
    """Return the registry of one plugin kind, calling its register hook once."""
    if kind not in KINDS:
        raise PluginError(f"unknown plugin kind {kind!r}", hint=f"one of {', '.join(KINDS)}")
    with _lock:
        reg = _registries.get(kind)
        if reg is not None:
            return reg
        pm = get_plugin_manager()
        reg = Registry(kind)
        hook = getattr(pm.hook, KINDS[kind])
        for impl in hook.get_hookimpls():  # in load order
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


def reset() -> None:
    """Forget loaded plugins and registries; the next lookup loads entry points again."""
    global _pm
    with _lock:
        _pm = None
        _loaded.clear()
        _registries.clear()
