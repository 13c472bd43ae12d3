"""The plugin registry: pluggy's manager, the kinds plugins declare, and the registries of
what follows the model (analyses, report blocks, output formats).

Built-ins are registered from a tuple of module names, third parties from the entry-point
group ``stepwall`` by pluggy's ``load_setuptools_entrypoints`` (unless
STEPWALL_DISABLE_PLUGIN_AUTOLOAD is set); any plugin but ``formats`` can be disabled by name,
as pytest's ``-p no:NAME`` (``build(disable=...)``, STEPWALL_DISABLE_PLUGINS). Each kind says
which of its fields provides what the core requires of its section
(`stepwall.plugin.requirements`), checked here. A broken third-party
plugin does not take the tool down: one that cannot be imported, implements a hook that does
not exist, raises while declaring or claims what another plugin owns is skipped, and the
reason kept in `Registry.problems` (``stepwall plugins`` lists it). Built-ins and plugins
passed explicitly (``extra``, the test kit) are not skipped: their errors raise.

Hooks are called through pluggy. A hook that turns one section into terms
(``stepwall_compute_terms`` for ``hardware``, …) is called on the plugin that owns the
section's kind only, plus any plugin that wraps the hook (``@hookimpl(wrapper=True)``); so
an implementation never needs an ``if kind != mine`` guard. Hooks every plugin may add to
(``stepwall_fixed_terms``, ``stepwall_constraints``) are called on the plugins whose kinds
the scenario uses and on plugins that own no kind. A plugin's exception or a result of the
wrong type becomes a `PluginError` naming the plugin and the hook; which plugin raised is
seen by hook-call monitoring (``add_hookcall_monitoring``), not by calling hooks again.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import re
import time
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pluggy
import sympy as sp

from stepwall.core.errors import DimensionError, PluginError, StepwallError, env_flag
from stepwall.core.fields import KindSpec, combined
from stepwall.core.terms import (
    OP_KINDS,
    Constraint,
    Decoding,
    Engine,
    Layout,
    OpKind,
    Step,
    Term,
    Workload,
)
from stepwall.plugin import hookspecs, requirements
from stepwall.plugin.entries import Layouts
from stepwall.plugin.hookspecs import DISABLE_ENV, DISABLED_ENV, ENTRY_POINT_GROUP

if TYPE_CHECKING:
    from stepwall.core.scenario import Scenario
    from stepwall.core.symbols import Parameter

# The built-in plugins: the name each is registered by, and its module (registered in this order,
# through the same hooks as a third party's).
BUILTIN_PLUGINS = {
    "moe_transformer": "stepwall.plugins.moe_transformer",
    "gpu": "stepwall.plugins.gpu",
    "interconnect": "stepwall.plugins.interconnect",
    "parallelism": "stepwall.plugins.parallelism",
    "decoding": "stepwall.plugins.decoding",
    "engine": "stepwall.plugins.engine",
    "workload": "stepwall.plugins.workload",
    "analyses": "stepwall.analyses.builtin",
    "report_blocks": "stepwall.apps.report.blocks",
    "formats": "stepwall.io.formats",
}

# Built-ins that cannot be disabled, with what needs them (disabling another built-in only
# removes what it declares: a scenario that uses one of its kinds is refused as unknown keys).
REQUIRED_BUILTINS = {"formats": "every command's text, JSON and CSV output"}

# The section whose kind selects the plugin for each kind-selected hook.
OWNED_HOOKS = {
    "stepwall_decoding": "decoding",
    "stepwall_decoding_under_load": "decoding",
    "stepwall_engine": "engine",
    "stepwall_partition": "parallel",
    "stepwall_steps": "workload",
    "stepwall_model_work": "model",
    "stepwall_compute_terms": "hardware",
    "stepwall_collective_terms": "cluster.scale_up",
    "stepwall_device_memory": "hardware",
    "stepwall_layouts": "parallel",
}
# name -> (hook that declares entries, what an entry is called in messages)
ENTRY_HOOKS = {
    "analyses": ("stepwall_analyses", "analysis"),
    "blocks": ("stepwall_report_blocks", "report block"),
    "formats": ("stepwall_formats", "output format"),
    "primitives": ("stepwall_primitives", "primitive"),
    "metrics": ("stepwall_metrics", "metric"),
    "op_kinds": ("stepwall_op_kinds", "op kind"),
    "commands": ("stepwall_commands", "command"),
}


class Registry:
    """A built plugin manager with the kinds and entries its plugins declare.

    ``problems`` maps each skipped third-party plugin to why; ``import_seconds`` how long
    each installed plugin took to import; ``models`` keeps built models by shape (`build_model`).
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        problems: Mapping[str, str] | None = None,
        lenient: frozenset[str] = frozenset(),
        import_seconds: Mapping[str, float] | None = None,
    ) -> None:
        self.pm = pm
        self.problems: dict[str, str] = dict(problems or {})
        self.import_seconds: dict[str, float] = dict(import_seconds or {})
        self.kinds: dict[tuple[str, str], KindSpec] = {}
        self.models: dict[Any, list[tuple[Any, Any]]] = {}
        self._order: list[Any] = []
        self._lenient = lenient
        self._entries: dict[str, dict[str, Any]] = {}
        self.is_default = False  # the built-ins and installed plugins only (`default`)
        self._raised: tuple[BaseException, str] | None = None  # the last hook error, by whom
        pm.add_hookcall_monitoring(_ignore, self._note_raiser)
        for impl in pm.hook.stepwall_spec_kinds.get_hookimpls():  # registration order
            name = pm.get_name(impl.plugin) or "?"
            try:
                self.kinds.update(_claims(impl, name, self.kinds))
            except PluginError as e:
                self._skip_or_raise(name, e, lenient)
        for key, spec in list(self.kinds.items()):
            if spec.extends is not None:
                base = self.kinds.get(spec.extends)
                if base is None or base.extends is not None:
                    problem = PluginError(
                        f"plugin {spec.plugin}: kind {spec.kind!r} extends {spec.extends!r}, "
                        "which no plugin declares (or which extends another)"
                    )
                    self._skip_or_raise(spec.plugin, problem, lenient)
                    continue
                fields = combined(base.fields, spec.fields, spec.fields.__name__)
                provides = {**base.provides, **spec.provides}
                self.kinds[key] = attrs.evolve(spec, fields=fields, provides=provides)
        for plugin, wrong in requirements.problems(self.kinds):
            if plugin in {s.plugin for s in self.kinds.values()}:  # not skipped already
                self._skip_or_raise(plugin, PluginError(wrong), lenient)

    # analyses, report blocks and formats are gathered on first use: a command that needs
    # none of them does not import what they import
    @property
    def analyses(self) -> dict[str, Any]:
        return self._gather("analyses")

    @property
    def blocks(self) -> dict[str, Any]:
        return self._gather("blocks")

    @property
    def formats(self) -> dict[str, Any]:
        return self._gather("formats")

    @property
    def primitives(self) -> dict[str, Any]:
        return self._gather("primitives")

    @property
    def metrics(self) -> dict[str, Any]:
        """The metrics plugins declared (``stepwall_metrics``), by name."""
        return self._gather("metrics")

    @property
    def op_kinds(self) -> dict[str, OpKind]:
        """The kinds of per-GPU work: the built-in `OP_KINDS`, then those plugins declared
        (``stepwall_op_kinds``), by name; a plugin's that takes a built-in's name raises."""
        extra = self._gather("op_kinds")
        for kind in extra.values():
            if kind.name in OP_KINDS:
                raise PluginError(f"plugin {kind.plugin}: op kind {kind.name!r} is a built-in "
                                  "op kind")  # fmt: skip
        return {**OP_KINDS, **extra}

    @property
    def commands(self) -> dict[str, Any]:
        """The commands plugins added (``stepwall_commands``), by name."""
        return self._gather("commands")

    def _gather(self, attr: str) -> dict[str, Any]:
        if attr not in self._entries:
            hook, what = ENTRY_HOOKS[attr]
            table: dict[str, Any] = {}
            self._entries[attr] = table
            for impl in getattr(self.pm.hook, hook).get_hookimpls():
                name = self.pm.get_name(impl.plugin) or "?"
                try:
                    table.update(_entries(impl, name, hook, what, table))
                except PluginError as e:
                    if name not in self._lenient:  # raised: the next use asks again
                        del self._entries[attr]
                    self._skip_or_raise(name, e, self._lenient)
        return self._entries[attr]

    def _skip_or_raise(self, name: str, error: PluginError, lenient: frozenset[str]) -> None:
        if name not in lenient:
            raise error
        self.problems[name] = str(error)
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        tables: list[dict[Any, Any]] = [self.kinds, *self._entries.values()]
        for table in tables:
            for key in [k for k, v in table.items() if getattr(v, "plugin", None) == name]:
                del table[key]

    def plugins(self) -> list[tuple[str, object]]:
        """(name, plugin) of each registered plugin; pluggy also lists a disabled name, with
        None for its plugin, which this leaves out."""
        return [(n, p) for n, p in self.pm.list_name_plugin() if p is not None]

    def path(self, scenario: Scenario, requirement: str) -> str | None:
        """The spec path of ``scenario`` that provides ``requirement``
        (`stepwall.plugin.requirements`); None for an optional one its kind does not."""
        return requirements.path(self.kinds, scenario.kinds, requirement)

    def paths(self, scenario: Scenario) -> dict[str, str]:
        """The spec path that provides each requirement the kinds of ``scenario`` provide."""
        found = {name: self.path(scenario, name) for name in requirements.REQUIREMENTS}
        return {name: path for name, path in found.items() if path is not None}

    def parameter(self, scenario: Scenario, requirement: str) -> Parameter | None:
        """The Parameter that provides ``requirement`` in ``scenario`` (None: not stated)."""
        path = self.path(scenario, requirement)
        return scenario.parameter(path) if path is not None else None

    def required(self, scenario: Scenario, requirement: str) -> Parameter:
        """The Parameter of a required value (the registry checked that its kinds provide
        it); a PluginError naming the owner when the scenario has none."""
        found = self.parameter(scenario, requirement)
        if found is None:
            want = requirements.REQUIREMENTS[requirement]
            who = self.owner(want.section, scenario.kinds.get(want.section, ""))
            raise PluginError(f"plugin {who}: section {want.section!r} of the scenario provides "
                              f"no {requirement!r} ({want.meaning})")  # fmt: skip
        return found

    # ---- calling hooks

    def owner(self, section: str, kind: str) -> str:
        spec = self.kinds.get((section, kind))
        return spec.plugin if spec else "?"

    def call_owner(self, hook: str, scenario: Scenario, **kwargs: Any) -> Any:
        """A kind-selected hook, on the plugin that owns the scenario's kind of its section
        (and on plugins that wrap the hook); None when that plugin does not implement it."""
        section = OWNED_HOOKS[hook]
        owner = self.owner(section, scenario.kinds.get(section, ""))
        return self._call(hook, {owner}, dict(scenario=scenario, **kwargs), single=owner)

    def call_each(self, hook: str, scenario: Scenario, **kwargs: Any) -> list[Any]:
        """A hook every plugin may add to: called on the plugins whose kinds the scenario
        uses and on plugins that own no kind; one result per plugin that returned one."""
        used = {self.owner(s, k) for s, k in scenario.kinds.items()}
        owners = {spec.plugin for spec in self.kinds.values()}
        names = {n for n, _ in self.plugins() if n in used or n not in owners}
        return list(self._call(hook, names, dict(scenario=scenario, **kwargs)) or [])

    def _call(
        self, hook: str, names: set[str], kwargs: dict[str, Any], single: str | None = None
    ) -> Any:
        caller = getattr(self.pm.hook, hook)
        impls = caller.get_hookimpls()
        wrappers = {self.pm.get_name(i.plugin) for i in impls if i.wrapper or i.hookwrapper}
        plain = {self.pm.get_name(i.plugin) for i in impls} - wrappers
        if single is not None and single not in plain:
            return None
        drop = [p for n, p in self.plugins() if n not in names | wrappers]
        subset = self.pm.subset_hook_caller(hook, remove_plugins=drop)
        try:
            out = subset(**kwargs)
        except Exception as e:
            raise self._blame(hook, names & plain, e) from None
        if caller.spec.opts.get("firstresult"):
            if out is not None:
                _check_result(hook, out, single or "?")
            return out
        try:
            for result in out:
                _check_result(hook, result, single or "?")
        except PluginError:
            if single is not None:
                raise
            for name in sorted(names & plain):  # which plugin returned it: ask each alone
                self._call(hook, {name}, kwargs, single=name)
            raise
        return out

    def _note_raiser(
        self, outcome: pluggy.Result[Any], hook: str, impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:  # fmt: skip
        """Hook-call monitoring: when a hook call raised, remember which plugin's
        implementation raised it (the innermost of its frames in the traceback)."""
        error = outcome.exception
        if error is None:
            return
        who, tb = None, error.__traceback__
        while tb is not None:
            mine = sorted({i.plugin_name for i in impls if _runs(tb.tb_frame, i.function)})
            who = ", ".join(mine) or who
            tb = tb.tb_next
        if who is not None:
            self._raised = (error, who)

    def _blame(self, hook: str, names: set[str], error: Exception) -> Exception:
        """The error of a hook call, naming the plugin that raised it (hook-call monitoring
        saw which; else every plugin the call reached)."""
        raised, self._raised = self._raised, None
        who = raised[1] if raised and raised[0] is error else ", ".join(sorted(names))
        if isinstance(error, DimensionError):
            return error if error.plugin else error.located(term=error.term, plugin=who)
        if isinstance(error, StepwallError):
            return error
        wrapped = PluginError(f"plugin {who}: {hook} raised {type(error).__name__}: {error}")
        wrapped.__cause__ = error
        return wrapped

    # ---- description

    def describe(self) -> list[dict[str, Any]]:
        """Each plugin: name, version, the kinds and entries it declares, the hooks it
        implements and how long it took to import."""
        rows = []
        for name, plugin in sorted(self.plugins(), key=lambda np: np[0]):
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or () if h.name != "_")
            kinds = sorted(f"{s}:{k}" for (s, k), spec in self.kinds.items() if spec.plugin == name)
            row: dict[str, Any] = {
                "name": name,
                "version": _version_of(plugin),
                "kinds": kinds,
                "hooks": hooks,
                "import_seconds": self.import_seconds.get(name, 0.0),
            }
            for attr in ENTRY_HOOKS:
                mine = sorted(k for k, v in getattr(self, attr).items() if v.plugin == name)
                if mine:
                    row[attr] = mine
            rows.append(row)
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

    def slow_imports(self, limit: float = 1.0) -> list[str]:
        """A line for each plugin whose import took over ``limit`` seconds."""
        return [
            f"plugin {name} took {s:.1f} s to import; every command pays it "
            f"(STEPWALL_DISABLE_PLUGIN_AUTOLOAD=1 skips installed plugins)"
            for name, s in sorted(self.import_seconds.items())
            if s > limit
        ]

    def remember(self, shape: Any, reads: Any, model: Any, keep: int = 256) -> None:
        """Keep a built model for its shape (at most ``keep`` shapes, least recent dropped)."""
        self.models.setdefault(shape, []).append((reads, model))
        if shape in self._order:
            self._order.remove(shape)
        self._order.append(shape)
        while len(self._order) > keep:
            self.models.pop(self._order.pop(0), None)

    def versions(self) -> tuple[tuple[str, str], ...]:
        """Every plugin with its version: part of what a cached model depends on."""
        return tuple(sorted((n, _version_of(p)) for n, p in self.plugins()))


def _runs(frame: types.FrameType, fn: Any) -> bool:
    """Whether ``frame`` runs ``fn``: its code, and for a closure its free variables (two
    plugins made by one factory share the code)."""
    code = getattr(fn, "__code__", None)
    if frame.f_code is not code:
        return False
    try:
        cells = [c.cell_contents for c in fn.__closure__ or ()]
    except ValueError:  # an empty cell
        return True
    seen = frame.f_locals
    return all(seen.get(v, c) is c for v, c in zip(code.co_freevars, cells, strict=True))


def _ignore(hook: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
    """Hook-call monitoring before a call: nothing to do."""


class _Guarded:
    """A function of a third-party entry (an analysis's ``run``, a format's ``write``, …):
    what it raises, other than stepwall's own errors, becomes a PluginError naming the
    plugin and the entry. A class, not a closure, so that it pickles as its function does;
    it keeps the function's name and docstring."""

    def __init__(self, fn: Any, who: str) -> None:
        self.fn, self.who = fn, who  # who: "plugin NAME: analysis 'x': run"
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.fn(*args, **kwargs)
        except StepwallError:
            raise
        except Exception as e:
            raise PluginError(f"{self.who} raised {type(e).__name__}: {e}") from e


def _returns() -> dict[str, tuple[type, bool]]:
    """What each hook returns: (type, whether a list of it)."""

    return {
        "stepwall_decoding": (Decoding, False),
        "stepwall_engine": (Engine, False),
        "stepwall_partition": (Layout, False),
        "stepwall_decoding_under_load": (Decoding, False),
        "stepwall_steps": (Step, True),
        "stepwall_model_work": (Workload, False),
        "stepwall_compute_terms": (Term, True),
        "stepwall_collective_terms": (Term, True),
        "stepwall_fixed_terms": (Term, True),
        "stepwall_constraints": (Constraint, True),
        "stepwall_device_memory": (sp.Expr, False),
        "stepwall_layouts": (Layouts, False),
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
    impl: Any, name: str, taken: Mapping[tuple[str, str], KindSpec]
) -> dict[tuple[str, str], KindSpec]:
    """One plugin's declared kinds, checked against those already ``taken``."""
    try:
        declared = impl.function()
    except Exception as e:
        raise PluginError(f"plugin {name}: stepwall_spec_kinds raised {e!r}") from None
    out: dict[tuple[str, str], KindSpec] = {}
    for spec in _declared(declared, name, "stepwall_spec_kinds", "KindSpec"):
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
        if not all(isinstance(x, str) and x for x in key) or not attrs.has(spec.fields):
            raise PluginError(
                f"plugin {name}: stepwall_spec_kinds declared {key!r} with fields "
                f"{spec.fields!r} (expected a section and a kind name, and a frozen attrs class)"
            )
        defaults = [s for s in (*taken.values(), *out.values()) if s.default]
        first = next((s for s in defaults if spec.default and s.section == spec.section), None)
        if first is not None:
            raise PluginError(
                f"plugin {name}: kind {spec.kind!r} is the default of section "
                f"{spec.section!r}, which is already kind {first.kind!r} of plugin "
                f"{first.plugin or name}"
            )
        out[key] = attrs.evolve(spec, plugin=name)
    return out


def _declared(declared: Any, name: str, hook: str, what: str) -> list[Any] | tuple[Any, ...]:
    """What a declaring hook returned: a list (None for nothing), else a PluginError."""
    if declared is None:
        return ()
    if not isinstance(declared, list | tuple):
        raise PluginError(f"plugin {name}: {hook} returned {type(declared).__name__} where a "
                          f"list of {what} was expected")  # fmt: skip
    return declared


def _entries(
    impl: Any, name: str, hook: str, what: str, taken: Mapping[str, Any]
) -> dict[str, Any]:
    """One plugin's declared analyses / blocks / formats, named and checked for clashes.

    Stays whole: one loop over the declared entries: each one's checks in the order their
    errors are reported, then its wrapping.
    """
    try:
        declared = impl.function()
    except Exception as e:
        raise PluginError(f"plugin {name}: {hook} raised {e!r}") from None
    out: dict[str, Any] = {}
    for entry in _declared(declared, name, hook, what):
        if not attrs.has(type(entry)) or not hasattr(entry, "name"):
            raise PluginError(
                f"plugin {name}: {hook} returned {type(entry).__name__} where a {what} was expected"
            )
        problem = _declaration_problem(entry)
        if problem:
            raise PluginError(f"plugin {name}: {hook} declared {what} "
                              f"{entry.name!r}: {problem}")  # fmt: skip
        if entry.name in taken or entry.name in out:
            owner = taken[entry.name].plugin if entry.name in taken else name
            raise PluginError(f"plugin {name}: {what} {entry.name!r} is already provided by "
                              f"plugin {owner}")  # fmt: skip
        for suffix in getattr(entry, "suffixes", ()):  # a file suffix picks one format
            other = next((e for e in (*taken.values(), *out.values())
                          if suffix in getattr(e, "suffixes", ())), None)  # fmt: skip
            if other is not None:
                raise PluginError(f"plugin {name}: {what} {entry.name!r}: suffix {suffix!r} "
                                  f"is already that of {other.name!r} (plugin "
                                  f"{other.plugin or name})")  # fmt: skip
        guarded = {}
        if name not in BUILTIN_PLUGINS:  # a built-in's error is a bug
            functions = [
                f.name
                for f in attrs.fields(type(entry))
                if str(f.type).startswith("Callable") and getattr(entry, f.name)
            ]
            guarded = {f: _Guarded(getattr(entry, f), f"plugin {name}: {what} {entry.name!r}: {f}")
                       for f in functions}  # fmt: skip
        out[entry.name] = attrs.evolve(entry, plugin=name, **guarded)
    return out


ENTRY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # what a command line or a block names


def _declaration_problem(entry: Any) -> str:
    """What is wrong with an entry's fields, judged by their declared types ("" if none).

    Stays whole: one case per declared field type.
    """
    if not isinstance(entry.name, str) or not ENTRY_NAME.fullmatch(entry.name):
        return "its name must be a plain name (letters, digits, _ and -)"
    for field in attrs.fields(type(entry)):
        value, want = getattr(entry, field.name), str(field.type)
        if want.startswith("Callable"):
            ok = callable(value) or (value is None and want.endswith("| None"))
            expected = "a function"
        elif want == "type":
            ok, expected = isinstance(value, type) and attrs.has(value), "a frozen attrs class"
        elif want == "tuple[str, ...]":
            ok = isinstance(value, tuple) and all(isinstance(x, str) and x for x in value)
            expected = "a tuple of names"
        elif want.startswith("Mapping"):
            ok, expected = isinstance(value, Mapping), "a mapping"
        elif want in ("str", "bool"):
            ok, expected = type(value).__name__ == want, want
        else:
            continue
        if not ok:
            return f"its {field.name} is {type(value).__name__} {value!r}, not {expected}"
    bad = [x for x in getattr(entry, "suffixes", ()) if not re.fullmatch(r"\.[A-Za-z0-9]+", x)]
    if bad:
        return f"its suffix {bad[0]!r} is not a file suffix such as '.csv'"
    return ""


def _dist_version(entry_point_name: str) -> str:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=entry_point_name):
        if ep.dist is not None:
            return ep.dist.version
    return "unknown"


def _version_of(plugin: object) -> str:
    version = getattr(plugin, "__version__", None)
    if version:
        return str(version)
    return _installed_version(_dist_names().get(getattr(plugin, "__name__", ""), "stepwall"))


@functools.cache
def _installed_version(dist: str) -> str:
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


def build(
    extra: Iterable[object] = (), autoload: bool | None = None, disable: Iterable[str] | None = None
) -> Registry:
    """A fresh registry: built-ins, entry points (unless disabled), then ``extra``.

    ``disable`` names plugins not to register, built-in or installed (like pytest's
    ``-p no:NAME``); None reads STEPWALL_DISABLE_PLUGINS (comma-separated). An entry point
    that fails to load or to register is skipped and recorded in `Registry.problems`; a
    built-in or an ``extra`` plugin that fails raises `PluginError`.
    """
    pm = pluggy.PluginManager("stepwall")
    pm.add_hookspecs(hookspecs)
    for name in disabled() if disable is None else disable:
        if name in REQUIRED_BUILTINS:
            raise PluginError(f"plugin {name}: cannot be disabled: {REQUIRED_BUILTINS[name]} "
                              "needs it")  # fmt: skip
        pm.set_blocked(name)
    for name, modname in BUILTIN_PLUGINS.items():
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(modname), name=name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        raise PluginError(f"plugin {e.plugin!r}: {e}") from None
    if autoload is None:
        autoload = not env_flag(DISABLE_ENV)
    problems: dict[str, str] = {}
    seconds: dict[str, float] = {}
    if autoload:
        _load_entry_points(pm, problems, seconds)
    lenient = frozenset(seconds) - set(problems)
    for plugin in extra:
        if not pm.is_registered(plugin):
            _register(pm, plugin, getattr(plugin, "__name__", None))
    return Registry(pm, problems, lenient, seconds)


def disabled() -> tuple[str, ...]:
    """The plugin names STEPWALL_DISABLE_PLUGINS lists (comma-separated, blanks ignored)."""
    return tuple(n.strip() for n in os.environ.get(DISABLED_ENV, "").split(",") if n.strip())


def _load_entry_points(
    pm: pluggy.PluginManager, problems: dict[str, str], seconds: dict[str, float]
) -> None:
    """Load and register the entry points of group ``stepwall`` through pluggy, one at a time
    so that one that fails is skipped and recorded in ``problems`` (the others load);
    ``seconds``: how long each loaded one took (the built-ins' are the framework's own, and
    timing them would make output depend on how busy the machine is)."""
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN_PLUGINS:
            problems[ep.name] = f"plugin {ep.name}: the name is a built-in plugin's"
        if pm.has_plugin(ep.name) or pm.is_blocked(ep.name) or ep.name in problems:
            continue
        start = time.perf_counter()
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=ep.name)
        except pluggy.PluginValidationError as e:  # loaded, refused by register
            problems[ep.name] = f"plugin {ep.name}: cannot register: {_folded(e)}"
            continue
        except ValueError as e:  # the same object under another entry point: once is enough
            if "already registered" not in str(e):
                problems[ep.name] = f"plugin {ep.name}: cannot load entry point {ep.value}: {e!r}"
            continue
        except (Exception, SystemExit) as e:  # an import that exits takes nothing down
            problems[ep.name] = f"plugin {ep.name}: cannot load entry point {ep.value}: {e!r}"
            continue
        seconds[ep.name] = time.perf_counter() - start
        plugin = pm.get_plugin(ep.name)
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as e:
            pm.unregister(plugin)
            problems[ep.name] = f"plugin {ep.name}: {_folded(e)}"
            continue
        if not pm.get_hookcallers(plugin):
            pm.unregister(plugin)
            kind = type(plugin).__name__
            problems[ep.name] = (f"plugin {ep.name}: entry point {ep.value} is a {kind} "
                                 "with no @hookimpl function")  # fmt: skip


def _register(pm: pluggy.PluginManager, plugin: object, name: str | None) -> None:
    """Register one plugin and check its hooks exist; on failure leave ``pm`` untouched."""
    label = name or getattr(plugin, "__name__", None) or repr(plugin)
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as e:
        raise PluginError(f"plugin {label}: cannot register: {_folded(e)}") from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        pm.unregister(plugin)
        raise PluginError(f"plugin {label}: {_folded(e)}") from None


def _folded(error: Exception) -> str:
    """pluggy's message on one line."""
    return " ".join(str(error).split())


_DEFAULT: dict[tuple[str, ...], Registry] = {}


def default(disable: Iterable[str] | None = None) -> Registry:
    """The registry of the built-ins and installed plugins, less those ``disable`` names (None:
    those STEPWALL_DISABLE_PLUGINS names), built on first use (the command line and the
    library's defaults use it; pass a registry explicitly to use another)."""
    names = tuple(sorted(set(disabled() if disable is None else disable)))
    if names not in _DEFAULT:
        _DEFAULT[names] = build(disable=names)
        _DEFAULT[names].is_default = True
    return _DEFAULT[names]
