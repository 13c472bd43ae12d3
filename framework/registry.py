"""The plugin manager: built-ins from a tuple of module names, third parties from the
entry-point group ``stepwall`` (unless STEPWALL_DISABLE_PLUGIN_AUTOLOAD is set).

`Hooks` is the typed facade the composer calls; it wraps each call so an exception inside
a plugin becomes a `PluginError` naming the plugin and the hook.

A broken third-party plugin does not take the tool down: an entry point that cannot be
imported, implements a hook that does not exist, raises in ``stepwall_spec_kinds`` or claims
a kind another plugin already owns is skipped, and the reason is kept in `Hooks.problems`
(``stepwall plugins`` lists it). Built-ins and plugins passed explicitly (``extra``, the test
kit) are not skipped: their errors raise `PluginError`, naming the plugin.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import time
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
    """A built plugin manager with its declared kinds.

    ``problems`` maps the name of each skipped third-party plugin to why it was skipped.
    ``lenient`` names the plugins that are skipped (not raised on) when their kinds clash or
    ``stepwall_spec_kinds`` raises: the entry points.
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        problems: dict[str, str] | None = None,
        lenient: frozenset[str] = frozenset(),
        import_seconds: dict[str, float] | None = None,
    ) -> None:
        self.pm = pm
        self.problems: dict[str, str] = dict(problems or {})
        self.import_seconds: dict[str, float] = dict(import_seconds or {})
        # built models by shape (`stepwall.model.build_model`), most recent last
        self.models: dict[Any, list[tuple[Any, Any]]] = {}
        self._order: list[Any] = []
        self.kinds: dict[tuple[str, str], KindSpec] = {}
        for impl in pm.hook.stepwall_spec_kinds.get_hookimpls():  # registration order
            name = pm.get_name(impl.plugin) or "?"
            try:
                claims = _claims(impl, name, self.kinds)
            except PluginError as e:
                if name not in lenient:
                    raise
                self.problems[name] = str(e)
                pm.unregister(impl.plugin)
                continue
            self.kinds.update(claims)

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call a hook with keyword arguments; a plugin's exception, or a result of the wrong
        type, is a `PluginError` naming the plugin and the hook."""
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
            _check_result(hook, out, self.pm.get_name(impl.plugin) or "?")
            if firstresult:
                return out
            results.append(out)
        return None if firstresult else results

    def remember(self, shape: Any, reads: Any, model: Any, keep: int = 256) -> None:
        """Keep a built model for its shape (at most ``keep`` shapes, least recent dropped)."""
        self.models.setdefault(shape, []).append((reads, model))
        if shape in self._order:
            self._order.remove(shape)
        self._order.append(shape)
        while len(self._order) > keep:
            self.models.pop(self._order.pop(0), None)

    def slow_imports(self, limit: float = 1.0) -> list[str]:
        """A line for each plugin whose import took over ``limit`` seconds."""
        return [
            f"plugin {name} took {s:.1f} s to import; every command pays it "
            f"(STEPWALL_DISABLE_PLUGIN_AUTOLOAD=1 skips installed plugins)"
            for name, s in sorted(self.import_seconds.items())
            if s > limit
        ]

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
                {
                    "name": name,
                    "version": _version_of(plugin),
                    "kinds": kinds,
                    "hooks": hooks,
                    "import_seconds": self.import_seconds.get(name, 0.0),
                }
            )
        for name, problem in sorted(self.problems.items()):
            rows.append(
                {
                    "name": name,
                    "version": _dist_version(name),
                    "kinds": [],
                    "hooks": [],
                    "problem": f"skipped: {problem}",
                }
            )
        return rows


def _returns() -> dict[str, tuple[type, bool]]:
    """What each hook returns: (type, whether a list of it)."""
    import sympy as sp

    from stepwall.terms import Constraint, Decoding, Layout, Term, Workload

    return {
        "stepwall_decoding": (Decoding, False),
        "stepwall_partition": (Layout, False),
        "stepwall_model_work": (Workload, False),
        "stepwall_compute_terms": (Term, True),
        "stepwall_collective_terms": (Term, True),
        "stepwall_fixed_terms": (Term, True),
        "stepwall_constraints": (Constraint, True),
        "stepwall_device_memory": (sp.Expr, False),
    }


def _check_result(hook: str, out: Any, plugin: str) -> None:
    want = _returns().get(hook)
    if want is None:
        return
    kind, many = want
    if many:
        if not isinstance(out, list | tuple):
            raise PluginError(
                f"plugin {plugin}: {hook} returned {type(out).__name__} where a list of "
                f"{kind.__name__} was expected"
            )
        bad = next((x for x in out if not isinstance(x, kind)), None)
        if bad is not None:
            raise PluginError(
                f"plugin {plugin}: {hook} returned a list holding {type(bad).__name__} where "
                f"each item must be a {kind.__name__}"
            )
    elif not isinstance(out, kind):
        raise PluginError(
            f"plugin {plugin}: {hook} returned {type(out).__name__} where a {kind.__name__} "
            "was expected"
        )


def _claims(
    impl: Any, name: str, taken: dict[tuple[str, str], KindSpec]
) -> dict[tuple[str, str], KindSpec]:
    """One plugin's declared kinds, checked against those already ``taken``."""
    try:
        declared = impl.function()
    except Exception as e:
        raise PluginError(f"plugin {name}: stepwall_spec_kinds raised {e!r}") from None
    out: dict[tuple[str, str], KindSpec] = {}
    for spec in declared or ():
        if not isinstance(spec, KindSpec):
            raise PluginError(
                f"plugin {name}: stepwall_spec_kinds returned {type(spec).__name__} "
                "where a KindSpec was expected"
            )
        key = (spec.section, spec.kind)
        if key in taken or key in out:
            owner = taken[key].plugin if key in taken else name
            raise PluginError(
                f"plugin {name}: kind {spec.kind!r} of section {spec.section!r} is "
                f"already claimed by plugin {owner}"
            )
        out[key] = KindSpec(spec.section, spec.kind, spec.fields, spec.doc, spec.default, name)
    return out


def _dist_version(entry_point_name: str) -> str:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=entry_point_name):
        if ep.dist is not None:
            return ep.dist.version
    return "unknown"


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
    """A fresh plugin manager: built-ins, entry points (unless disabled), then ``extra``.

    An entry point that fails to load or to register is skipped and recorded in
    `Hooks.problems`; a built-in or an ``extra`` plugin that fails raises `PluginError`.
    """
    pm = pluggy.PluginManager("stepwall")
    pm.add_hookspecs(hookspecs)
    seconds: dict[str, float] = {}
    for modname in BUILTIN_PLUGINS:
        start = time.perf_counter()
        module = importlib.import_module(modname)
        seconds[modname.rsplit(".", 1)[-1]] = time.perf_counter() - start
        pm.register(module, name=modname.rsplit(".", 1)[-1])
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        raise PluginError(f"plugin {e.plugin!r}: {e}") from None
    if autoload is None:
        autoload = not os.environ.get(DISABLE_ENV)
    problems: dict[str, str] = {}
    lenient: set[str] = set()
    if autoload:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if pm.get_plugin(ep.name) is not None or ep.name in problems:
                continue
            start = time.perf_counter()
            try:
                plugin = ep.load()
                seconds[ep.name] = time.perf_counter() - start
            except Exception as e:
                problems[ep.name] = f"plugin {ep.name}: cannot load entry point {ep.value}: {e!r}"
                continue
            if pm.is_registered(plugin):
                continue
            try:
                _register(pm, plugin, ep.name)
            except PluginError as e:
                problems[ep.name] = str(e)
                continue
            lenient.add(ep.name)
    for plugin in extra:
        if not pm.is_registered(plugin):
            _register(pm, plugin, getattr(plugin, "__name__", None))
    return Hooks(pm, problems, frozenset(lenient), seconds)


def _register(pm: pluggy.PluginManager, plugin: object, name: str | None) -> None:
    """Register one plugin and check its hooks exist; on failure leave ``pm`` untouched."""
    label = name or getattr(plugin, "__name__", None) or repr(plugin)
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as e:
        raise PluginError(f"plugin {label}: cannot register: {e}") from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        pm.unregister(plugin)
        raise PluginError(f"plugin {label}: {e}") from None


@functools.cache
def default() -> Hooks:
    """The process-wide plugin manager (built-ins plus installed entry points)."""
    return build()
