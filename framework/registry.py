"""The plugin manager: built-ins from a tuple of module names, third parties from the
entry-point group ``stepwall`` (unless STEPWALL_DISABLE_PLUGIN_AUTOLOAD is set).

`Hooks` is the typed facade the composer calls; it wraps each call so an exception inside
a plugin becomes a `PluginError` naming the plugin and the hook.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
from collections.abc import Callable
from typing import Any

import pluggy
from stepwall import hookspecs
from stepwall.errors import PluginError, StepwallError
from stepwall.spec import KindSpec

BUILTIN_PLUGINS = (
    "stepwall.plugins.moe_transformer",
    "stepwall.plugins.gpu",
    "stepwall.plugins.interconnect",
    "stepwall.plugins.parallelism",
    "stepwall.plugins.decoding",
    "stepwall.plugins.overhead",
    "stepwall.plugins.workload",
)
ENTRY_POINT_GROUP = "stepwall"
DISABLE_ENV = "STEPWALL_DISABLE_PLUGIN_AUTOLOAD"


class Hooks:
    """A built plugin manager with its declared kinds."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self.kinds: dict[tuple[str, str], KindSpec] = {}
        for impl in pm.hook.stepwall_spec_kinds.get_hookimpls():
            name = pm.get_name(impl.plugin) or "?"
            try:
                declared = impl.function()
            except Exception as e:
                raise PluginError(f"plugin {name}: stepwall_spec_kinds raised {e!r}") from None
            for spec in declared or ():
                key = (spec.section, spec.kind)
                if key in self.kinds:
                    raise PluginError(
                        f"plugin {name}: kind {spec.kind!r} of section {spec.section!r} is "
                        f"already claimed by plugin {self.kinds[key].plugin}"
                    )
                self.kinds[key] = KindSpec(
                    spec.section, spec.kind, spec.fields, spec.doc, spec.default, name
                )

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call a hook with keyword arguments; a plugin's exception names the plugin."""
        caller = getattr(self.pm.hook, hook)
        impls = caller.get_hookimpls()
        firstresult = caller.spec.opts.get("firstresult", False)
        results = []
        for impl in reversed(impls):  # pluggy order: last registered first
            args = {k: kwargs[k] for k in impl.argnames}
            try:
                out = impl.function(**args)
            except StepwallError:
                raise
            except Exception as e:
                name = self.pm.get_name(impl.plugin)
                raise PluginError(f"plugin {name}: {hook} raised {type(e).__name__}: {e}") from e
            if out is None:
                continue
            if firstresult:
                return out
            results.append(out)
        return None if firstresult else results

    def plugin_of(self, section: str, kind: str) -> str:
        spec = self.kinds.get((section, kind))
        return spec.plugin if spec else "?"

    def describe(self) -> list[dict[str, Any]]:
        """Each plugin: name, version, the kinds it claims and the hooks it implements."""
        rows = []
        for name, plugin in sorted(self.pm.list_name_plugin(), key=lambda np: np[0]):
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or () if h.name != "_")
            kinds = sorted(f"{s}:{k}" for (s, k), spec in self.kinds.items() if spec.plugin == name)
            rows.append(
                {"name": name, "version": _version_of(plugin), "kinds": kinds, "hooks": hooks}
            )
        return rows


def _version_of(plugin: object) -> str:
    version = getattr(plugin, "__version__", None)
    if version:
        return str(version)
    dist = _dist_names().get(getattr(plugin, "__name__", ""), "stepwall")
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def _dist_names() -> dict[str, str]:
    out = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is not None:
            out[ep.value.split(":")[0]] = ep.dist.name
    return out


def build(extra: tuple[object, ...] = (), autoload: bool | None = None) -> Hooks:
    """A fresh plugin manager: built-ins, entry points (unless disabled), then ``extra``."""
    pm = pluggy.PluginManager("stepwall")
    pm.add_hookspecs(hookspecs)
    for modname in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname.rsplit(".", 1)[-1])
    if autoload is None:
        autoload = not os.environ.get(DISABLE_ENV)
    if autoload:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                plugin = ep.load()
            except Exception as e:
                raise PluginError(f"plugin {ep.name}: cannot load entry point: {e!r}") from None
            if pm.get_plugin(ep.name) is None and not pm.is_registered(plugin):
                pm.register(plugin, name=ep.name)
    for plugin in extra:
        pm.register(plugin, name=getattr(plugin, "__name__", None))
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        raise PluginError(f"plugin {e.plugin!r}: {e}") from None
    return Hooks(pm)


@functools.cache
def default() -> Hooks:
    """The process-wide plugin manager (built-ins plus installed entry points)."""
    return build()


Factory = Callable[[], Hooks]
