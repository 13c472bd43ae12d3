"""Reports: a TOML report spec -> REPORT.md, one SVG per plot, one CSV per table.

A report names base scenarios (aliases), then an ordered list of blocks. Each block's
``kind`` names a block kind from the registry (heading, prose, table, plot, formula,
derivation, or one a plugin adds) whose options class validates the block's other keys.
Every number in the output is computed: prose holds placeholders such as
``{tp8.tokens_per_s_per_user:.0f}`` (`stepwall.apps.report.placeholders`) filled from the
evaluated models, tables and derivations. Output is byte-deterministic: no timestamps, fixed
fonts, SVG hash salt and metadata, sorted and relative provenance paths. See docs/reports.md.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.analyses.ranges import publish
from stepwall.apps.report.placeholders import Infeasible, Namespace, fill
from stepwall.apps.sweep import metric_names, pick, run_sweep
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import PluginError, SpecError, did_you_mean
from stepwall.core.options import option, structure_options
from stepwall.core.terminal import visible
from stepwall.core.units import parse_quantity
from stepwall.io.output import write_file, write_folder
from stepwall.model.compose import StepModel, build_model
from stepwall.model.metrics import DIAGNOSTIC_METRICS, METRICS
from stepwall.numeric.parallel import Jobs
from stepwall.plugin import registry as registries
from stepwall.plugin.entries import BlockKind
from stepwall.plugin.registry import Registry
from stepwall.spec.loader import find_spec_file, read_toml

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a report's name: one folder under out/
FEASIBLE, VIOLATION = "__feasible__", "__violation__"


@attrs.frozen
class ScenarioRef:
    scenario: str = option("a scenario: catalog name, or a path relative to the report")
    set: tuple[str, ...] = option("--set overrides for this alias", default=())
    label: str = option("how tables and plots name it (default: the alias)", default="")


@attrs.frozen
class ReportSpec:
    """A report spec file: its title, description, aliases and blocks."""

    title: str = option("the report's title (placeholders allowed)")
    scenarios: dict[str, Any] = option("aliases: ALIAS = scenario, or a table with set, label")
    description: str = option("a paragraph under the title (placeholders allowed)", default="")
    name: str = option("the report's name (default: the file's stem)", default="")
    block: tuple[dict[str, Any], ...] = option("the blocks, in order ([[block]] tables)",
                                               default=())  # fmt: skip


class Report:
    """One report run: loads the spec, builds the models, renders the blocks."""

    def __init__(
        self,
        ref: str | Path,
        sets: Sequence[str] = (),
        cwd: Path | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.registry = registry or registries.default()
        self.cwd = cwd or Path.cwd()
        self.ref = str(ref)
        self.path = find_spec_file(self.ref, "reports", where="report", key="", base=self.cwd)
        self.where = self._display(self.path)
        doc = read_toml(self.path)
        self.spec: ReportSpec = structure_options(ReportSpec, doc, self.where)
        self.sets = list(sets)
        self.files: set[Path] = {self.path.resolve()}
        self.models: dict[str, StepModel] = {}
        self.refs: dict[str, ScenarioRef] = {}
        self.ns = Namespace()
        self.derivations: dict[str, Any] = {}
        self.ids: dict[str, str] = {}  # block ids -> the block that took each
        self.outputs: dict[str, bytes] = {}
        self._cache: dict[tuple[Any, ...], dict[str, np.ndarray]] = {}
        if "name" in doc and not NAME.fullmatch(self.spec.name):  # out/NAME, never elsewhere
            raise self.err("name", f"{self.spec.name!r} is not a plain name",
                           "letters, digits, '.', '-' and '_', e.g. k26-study")  # fmt: skip
        self.name = self.spec.name or self.path.stem
        self._check_refs()
        try:  # a block's error is raised when rendering, after the scenarios' errors
            self._blocks, self._blocks_error = self._parse_blocks(), None
        except SpecError as e:
            self._blocks, self._blocks_error = [], e
        # the blocks' heavy work starts now, beside the loading (`BlockKind.compute`)
        order = sorted(self._blocks, key=lambda p: (not p[1].early, p[0]))
        heavy = [(at, functools.partial(kind.compute, self, opts, at))
                 for _, kind, opts, at in order if kind.compute is not None]  # fmt: skip
        self._jobs = Jobs([job for _, job in heavy])
        self._work: dict[str, int] = {at: k for k, (at, _) in enumerate(heavy)}
        try:
            self._load_scenarios()
        except BaseException:
            self._jobs.close()
            raise

    # ---- helpers for blocks

    def _display(self, p: Path) -> str:
        return display_path(p, self.cwd)

    def err(self, key: str, problem: str, expected: str = "") -> SpecError:
        return SpecError(self.where, key, problem, expected)

    def claim(self, name: str, key: str) -> None:
        """Take ``name`` as a block's id (its files and what placeholders call it): an
        identifier that no alias and no other block has."""
        if not IDENT.fullmatch(name):
            raise self.err(key, f"{name!r} is not an identifier",
                           "letters, digits and _, not starting with a digit")  # fmt: skip
        if name in self.refs:
            raise self.err(key, f"{name!r} is also a scenario alias", "a unique identifier")
        if name in self.ids:
            raise self.err(key, f"{name!r} is also the id of {self.ids[name].rstrip('.')}",
                           "a unique identifier")  # fmt: skip
        self.ids[name] = key.removesuffix("id")

    def _check_refs(self) -> None:
        if not self.spec.scenarios:
            raise self.err("scenarios", "missing or empty", "[scenarios.ALIAS] tables")
        for alias, entry in self.spec.scenarios.items():
            key = f"scenarios.{alias}"
            if not IDENT.fullmatch(alias):
                raise self.err(key, "alias is not an identifier", "letters, digits, _")
            given = {"scenario": entry} if isinstance(entry, str) else entry
            if not isinstance(given, dict):
                raise self.err(key, "not a scenario name or table", "a name or { scenario = … }")
            ref: ScenarioRef = structure_options(ScenarioRef, given, self.where, key + ".")
            self.refs[alias] = ref

    def _load_scenarios(self) -> None:
        for alias in self.refs:
            model = self._build(alias)
            self.track(model)
            self._publish(alias, model)

    def _build(self, alias: str) -> StepModel:
        ref, key = self.refs[alias], f"scenarios.{alias}"
        sets = [*ref.set, *self.sets]
        try:
            path = find_spec_file(
                ref.scenario, "scenarios", where=self.where, key=key, base=self.path.parent
            )
            model = build_model(path, sets, self.registry)
        except SpecError as e:
            if e.where == self.where:  # names the report and the alias already
                raise
            raise self.err(key, f"{e.where}:{e.key}: {e.problem}", e.expected) from None
        self.models[alias] = model
        return model

    def track(self, model: StepModel) -> None:
        """Count a model's spec files in the provenance block."""
        self.files |= spec_files(model)

    def _publish(self, alias: str, model: StepModel) -> None:
        ev = model.evaluate()
        s = self.ns.scalars
        broken = model.violations(ev)
        for name in metric_names(model):
            if broken and name not in DIAGNOSTIC_METRICS:
                s[f"{alias}.{name}"] = Infeasible(
                    f"scenario {alias} is infeasible ({broken[0].line})"
                )
                continue
            s[f"{alias}.{name}"] = float(np.asarray(pick(model, ev, name), dtype=float))
        s[f"{alias}.feasible"] = not broken
        for sym, v in model.values.items():
            s[f"{alias}.param.{sym.name}"] = float(v)
        s[f"{alias}.fits"] = bool(ev["memory_bytes_per_gpu"] <= ev["memory_capacity_per_gpu"])
        s[f"{alias}.name"] = model.scenario.name
        if model.scenario.ranges:  # ALIAS.METRIC.low / .high (docs/ranges.md)
            publish(s, alias, model, self.registry)

    def alias(self, name: Any, key: str) -> StepModel:
        if name not in self.refs:
            raise self.err(
                key, f"unknown scenario alias {name!r}", f"one of: {', '.join(self.refs)}"
            )
        # built on first use where the scenarios were not loaded (a block's compute
        # running in the helper process, which starts before the loading)
        return self.models[name] if name in self.models else self._build(name)

    def label(self, alias: str) -> str:
        return self.refs[alias].label or alias

    def metric(self, model: StepModel, name: Any, key: str) -> str:
        names = metric_names(model)
        if not isinstance(name, str) or name not in names:
            dym = did_you_mean(str(name), names)
            raise self.err(
                key,
                f"unknown metric {name!r}{dym}",
                "a metric such as tokens_per_s_per_user, group.moe or term.NAME",
            )
        return name

    def series(
        self, alias: str, key: str | None, values: Sequence[Any], metrics: Sequence[str], at: str
    ) -> dict[str, np.ndarray]:
        """Metrics of ``alias`` along ``key`` (vectorized through the alias's model), with
        each point's feasibility; performance metrics of infeasible points are NaN."""
        cache_key = (alias, key, repr(values), tuple(metrics))
        if cache_key not in self._cache:
            self._cache[cache_key] = self._series(alias, key, values, metrics, at)
        return self._cache[cache_key]

    def _series(
        self, alias: str, key: str | None, values: Sequence[Any], metrics: Sequence[str], at: str
    ) -> dict[str, np.ndarray]:
        model = self.models[alias]
        if key is None:
            ev = model.evaluate()
            out = {m: np.atleast_1d(np.asarray(pick(model, ev, m), dtype=float)) for m in metrics}
            broken = model.violations(ev)
            out[FEASIBLE] = np.array([not broken])
            out[VIOLATION] = np.array([broken[0].line if broken else ""], dtype=object)
            return _withheld(out)
        if not isinstance(key, str) or not isinstance(values, list | tuple) or not values:
            raise self.err(
                at,
                "needs a key and a non-empty list of values",
                'key = "parallel.tp", values = [8, 16]',
            )
        ref = self.refs[alias]
        scen = find_spec_file(ref.scenario, "scenarios", where=self.where, key=at,
                              base=self.path.parent)  # fmt: skip
        sets = [s for s in [*ref.set, *self.sets] if s.partition("=")[0].strip() != key]
        try:
            res = run_sweep(scen, [(key, list(values))], sets, metrics, registry=self.registry,
                            model=model)  # fmt: skip
        except SpecError as e:
            loc = e.key if e.where in ("--set", "--vary") else f"{e.where}:{e.key}"
            raise self.err(at, f"{loc}: {e.problem}", e.expected) from None
        self.track(res.model)
        out = dict(res.results)
        out[FEASIBLE] = np.asarray(res.feasible).reshape(-1)
        out[VIOLATION] = np.asarray(res.violation).reshape(-1)
        return _withheld(out)

    def computed(self, at: str, compute: Callable[[], Any]) -> Any:
        """The result of the block at ``at``'s ``compute``, started with the report (see
        `BlockKind`); ``compute()`` where none was started."""
        k = self._work.pop(at, None)
        return self._jobs.result(k) if k is not None else compute()

    # ---- rendering

    def _parse_blocks(self) -> list[tuple[int, BlockKind, Any, str]]:
        kinds = self.registry.blocks
        parsed = []
        for i, b in enumerate(self.spec.block):
            at = f"block[{i}]."
            if not isinstance(b, dict):
                raise self.err(f"block[{i}]", "not a table", "a [[block]] table")
            name = b.get("kind")
            if name not in kinds:
                dym = did_you_mean(str(name), sorted(kinds))
                raise self.err(at + "kind", f"unknown block kind {name!r}{dym}" if name else
                               "missing", f"one of: {', '.join(sorted(kinds))}")  # fmt: skip
            kind = kinds[name]
            given = {k: v for k, v in b.items() if k != "kind"}
            parsed.append((i, kind, kind.prepare(self, given, at), at))
        return parsed

    def render(self) -> str:
        """The Markdown (derivations choose closed forms by structure, not time, so a slower
        machine renders the same bytes)."""
        s = self.spec
        try:
            if self._blocks_error is not None:
                raise self._blocks_error
            parsed = self._blocks
            # blocks that compute values (tables, derivations) first, so prose can name them
            rendered: dict[int, list[str]] = {}
            for i, kind, opts, at in sorted(parsed, key=lambda p: (not p[1].early, p[0])):
                lines = kind.render(self, opts, at)
                if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
                    raise PluginError(f"plugin {kind.plugin or '?'}: report block {kind.name!r}: "
                                      "render returned no list of Markdown lines")  # fmt: skip
                rendered[i] = lines
        finally:
            self._jobs.close()
        # the title and description last, so they can name any block's values too
        lines = [f"# {fill(s.title, self.ns, self.where, 'title')}", ""]
        if s.description:
            lines += [fill(s.description.strip(), self.ns, self.where, "description"), ""]
        for i in range(len(parsed)):
            lines += [*rendered[i], ""]
        lines += self._provenance()
        return visible("\n".join(lines).rstrip(), lines=True) + "\n"

    def _provenance(self) -> list[str]:
        files, software = provenance(self.files, self._display, self.registry,
                                     list(self.models.values()))  # fmt: skip
        lines = ["## Provenance", "", "| spec file | SHA-256 |", "|:---|:---|"]
        lines += [f"| `{name}` | `{sha}` |" for name, sha in files]
        lines += ["", "| software | version |", "|:---|:---|"]
        lines += [f"| {name} | {version} |" for name, version in software]
        cmd = ["stepwall", "report", self.ref, *(a for s in self.sets for a in ("--set", s))]
        lines += ["", "Regenerate with:", "", "```", shlex.join(cmd), "```"]
        return lines


def display_path(p: Path, cwd: Path) -> str:
    """A spec file as provenance shows it: ``specs/…`` in the catalog, else relative to
    ``cwd``, else its name (no absolute paths: the same bytes on every machine)."""
    p = p.resolve()
    root = catalog_root().resolve()
    for base, prefix in ((root, "specs/"), (cwd.resolve(), "")):
        try:
            return prefix + p.relative_to(base).as_posix()
        except ValueError:
            pass
    return p.name


def spec_files(model: StepModel) -> set[Path]:
    """The files a model's values were read from: its scenario and every catalog entry."""
    out = set()
    for origin in (model.scenario.origin, *model.scenario.provenance.values()):
        p = Path(origin)
        if origin != "--set" and p.is_file():
            out.add(p.resolve())
    return out


def provenance(
    files: Iterable[Path],
    display: Callable[[Path], str],
    registry: Registry,
    models: Sequence[StepModel],
    dists: Sequence[str] = ("stepwall", "sympy", "numpy", "matplotlib"),
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The provenance block (reports, the explorer): (spec file as shown, SHA-256) by name,
    and (software, version): ``dists``, then the plugins in use (the built-in ones and those
    that own a kind or a term of ``models``; installed plugins not used are left out)."""
    shown = sorted((display(p), p) for p in files)
    spec = [(name, hashlib.sha256(p.read_bytes()).hexdigest()) for name, p in shown]
    software = [(dist, _version(dist)) for dist in dists]
    used = {
        name for name, _ in registry.pm.list_name_plugin() if name in registries.BUILTIN_PLUGINS
    }
    for m in models:
        used |= {t.plugin for t in m.terms}
        used |= {registry.owner(s, k) for s, k in m.scenario.kinds.items()}
    software += [(f"plugin {row['name']}", str(row["version"]))
                 for row in registry.describe() if row["name"] in used]  # fmt: skip
    return spec, software


def _withheld(series: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Performance metrics of infeasible points become NaN (a gap in a plot, "infeasible" in
    a table); diagnostic metrics (memory, GPUs) keep their values: they say why."""
    bad = ~series[FEASIBLE].astype(bool)
    if bad.any():
        for m, v in series.items():
            if m not in (FEASIBLE, VIOLATION) and m not in DIAGNOSTIC_METRICS:
                v = np.array(v, dtype=float)
                v[bad] = np.nan
                series[m] = v
    return series


def reason(model: StepModel, violation: str) -> str:
    """A sweep names the first failing constraint; say what it means."""
    said = {c.name: c.message for c in model.constraints}
    return f"{violation}: {said[violation]}" if violation in said else violation


def flatten_numbers(d: Any, prefix: str, out: dict[str, Any]) -> None:
    """Numbers in a nested mapping as ``prefix.a.b`` scalars (derivation details)."""
    if isinstance(d, Mapping):
        for k, v in d.items():
            if IDENT.fullmatch(str(k).replace(".", "_")):
                flatten_numbers(v, f"{prefix}.{k}", out)
    elif isinstance(d, int | float) and not isinstance(d, bool):
        out[prefix] = float(d)


def sweep_value(v: Any) -> float:
    """A plotted x value: numbers as given, unit strings as SI magnitudes."""
    if isinstance(v, int | float):
        return float(v)

    return parse_quantity(v)[0]


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def default_output(report: Report) -> Path:
    """Where a report goes without ``-o``: ``out/NAME`` under the working folder."""
    return Path("out") / report.name


def write(report: Report, out: Path) -> list[Path]:
    """Render REPORT.md, plots and CSVs and write them as the folder ``out``, atomically
    (built aside, then moved into place); return the files written."""

    text = report.render()
    return write_folder(out, dict(sorted({"REPORT.md": text.encode(), **report.outputs}.items())))


def write_page(report: Report, page: Path) -> list[Path]:
    """Render the report as the Markdown file ``page`` (docs/validation.md), its plots and
    CSVs in the folder beside it (docs/validation/), links pointing there; the folder is
    written first, then the page, each atomically."""

    text = report.render()
    folder = page.with_suffix("")
    for name in report.outputs:  # the blocks link their files by bare name
        text = text.replace(f"]({name})", f"]({folder.name}/{name})")
    files = write_folder(folder, dict(sorted(report.outputs.items())))
    write_file(page, text)
    return [page, *files]


__all__ = ["METRICS", "Report", "ReportSpec", "default_output", "write", "write_page"]
