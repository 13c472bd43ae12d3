"""Reports: a TOML report spec -> REPORT.md, one SVG per plot, one CSV per table.

A report names base scenarios (aliases), then an ordered list of blocks: headings, prose,
tables, plots, closed forms and derivations. Every number in the output is computed: prose
holds placeholders such as ``{tp8.tokens_per_s_per_user:.0f}`` or
``{(hgx_tp72.step_time_s / tp8.step_time_s - 1) * 100 as %:.0f}`` that are filled from the
evaluated models, tables and derivations. Output is byte-deterministic: no timestamps, fixed
fonts, SVG hash salt and metadata, sorted and relative provenance paths. See docs/reports.md.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from stepwall import registry, sweep, symbols
from stepwall.errors import SpecError, StepwallError, UnitError, did_you_mean
from stepwall.model import DIAGNOSTIC_METRICS, METRIC_UNITS, StepModel, build_model
from stepwall.spec import catalog_root, read_toml, resolve
from stepwall.units import parse_unit

BLOCK_KINDS = ("heading", "prose", "table", "plot", "formula", "derivation")
PLOTS = ("breakdown", "metric_vs_key", "latency_throughput")
DERIVATIONS = ("wall", "optimum", "crossover", "elasticity", "regime", "plateau")
GROUP_ORDER = ("moe", "dense", "attention", "comm", "base", "spec")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def csv_number(value: object) -> str:
    """Numbers in CSV cells to 10 significant digits: the last bits of a float differ with
    the order sympy's common-subexpression pass happens to pick, the figures do not."""
    if value is None:
        return ""
    if isinstance(value, bool | str):
        return str(value)
    return f"{float(value):.10g}"


# ---------------------------------------------------------------- units and formats


def unit_scale(unit: str, metric: str, where: str, key: str) -> float:
    """The factor a metric's SI value is divided by to show it in ``unit``; the unit must
    have the metric's dimension (``ms`` for a time, ``GB`` for bytes, ``tokens/s``)."""
    if unit in ("", "%"):
        return 0.01 if unit == "%" else 1.0
    try:
        scale, dim = parse_unit(unit)
        _, want = parse_unit(sweep.metric_unit(metric) or "1")
    except UnitError as e:
        raise SpecError(where, key, str(e), "a unit such as ms, GB or tokens/s") from None
    if dim != want:
        raise SpecError(
            where,
            key,
            f"unit {unit!r} is a {dim} unit but {metric} is {want}",
            f"a unit of dimension {want}",
        )
    return scale


def fmt(value: Any, spec: str) -> str:
    if isinstance(value, str):
        return format(value, spec) if spec else value
    v = float(value)
    if not math.isfinite(v):
        return "—"
    out = format(v, spec or ".4g")
    return "0" if re.fullmatch(r"-0\.?0*", out) else out


# ---------------------------------------------------------------- placeholders


class Infeasible:
    """What a placeholder finds for a performance metric of an infeasible scenario."""

    def __init__(self, why: str) -> None:
        self.why = why


INFEASIBLE = "infeasible"


class Namespace:
    """What placeholders can name: ``alias.METRIC`` / ``alias.group.G`` / ``alias.term.T`` /
    ``alias.param.KEY`` / ``alias.fits``; ``DERIV.value`` and the other Derivation fields;
    ``TABLE["row label"]["column label"]``."""

    def __init__(self) -> None:
        self.scalars: dict[str, Any] = {}
        self.tables: dict[str, dict[str, dict[str, float]]] = {}

    def get(self, path: str, where: str, key: str) -> Any:
        if path in self.scalars:
            value = self.scalars[path]
            if isinstance(value, Infeasible):
                raise SpecError(where, key, f"{path} has no value: {value.why}",
                                "a feasible scenario (see its violations)")  # fmt: skip
            return value

        dym = did_you_mean(path, sorted(self.scalars))
        raise SpecError(
            where,
            key,
            f"placeholder names unknown value {path!r}{dym}",
            "alias.metric, alias.group.G, alias.term.T, alias.param.KEY, "
            "derivation.value or table[row][column]",
        )


_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "choose": lambda cond, a, b: a if cond else b,
    "log": math.log,
    "exp": math.exp,
    "ceil": math.ceil,
    "floor": math.floor,
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_CMPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
}


def evaluate_expression(text: str, ns: Namespace, where: str, key: str) -> Any:
    """A placeholder expression: numbers, strings, + − × ÷ **, comparisons, min/max/abs/
    round/choose, dotted references and table lookups. Nothing else (no attribute calls)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise SpecError(
            where,
            key,
            f"placeholder {{{text}}} is not an expression",
            "e.g. {tp8.tokens_per_s_per_user:.0f}",
        ) from None

    def dotted(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            base = dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            path = dotted(node)
            if path is None:
                raise SpecError(where, key, f"cannot read {ast.unparse(node)!r}")
            return ns.get(path, where, key)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPS:
            return _CMPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        if isinstance(node, ast.Subscript):
            inner = node
            labels = []
            while isinstance(inner, ast.Subscript):
                labels.insert(0, ev(inner.slice))
                inner = inner.value
            name = dotted(inner)
            if name not in ns.tables or len(labels) != 2:
                raise SpecError(
                    where,
                    key,
                    f"{ast.unparse(node)!r} is not TABLE[row][column]",
                    f"a table id among: {', '.join(sorted(ns.tables)) or 'none'}",
                )
            table = ns.tables[name]
            row, col = (str(x) for x in labels)
            cell = table.get(row, {}).get(col)
            if isinstance(cell, Infeasible):
                raise SpecError(where, key, f"{ast.unparse(node)} has no value: {cell.why}",
                                "a feasible cell")  # fmt: skip
            if row not in table or col not in table[row]:
                raise SpecError(
                    where,
                    key,
                    f"table {name} has no cell [{row!r}][{col!r}]",
                    f"rows {list(table)}, columns {list(next(iter(table.values())))}",
                )
            return table[row][col]
        raise SpecError(
            where,
            key,
            f"placeholder uses {type(node).__name__}, not allowed",
            "arithmetic, comparisons, min/max/abs/round/choose and references",
        )

    try:
        return ev(tree.body)
    except ZeroDivisionError:
        raise SpecError(where, key, f"placeholder {{{text}}} divides by zero") from None


_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_FORMAT = re.compile(r":([<>^]?[+-]?[#0]?\d*[,_]?(?:\.\d+)?[a-zA-Z%]?)$")


def fill(text: str, ns: Namespace, where: str, key: str) -> str:
    """Replace each ``{expr[ as unit][:format]}``; ``{{`` and ``}}`` are literal braces."""
    text = text.replace("{{", "\x00").replace("}}", "\x01")

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        spec = ""
        f = _FORMAT.search(body)
        if f:
            body, spec = body[: f.start()], f.group(1)
        scale = 1.0
        expr, sep, unit = body.rpartition(" as ")
        if sep:
            unit = unit.strip()
            path = expr.strip()
            metric = path.split(".", 1)[1] if "." in path else ""
            if unit == "%":
                scale = 0.01
            elif metric and (metric in METRIC_UNITS or metric.split(".")[0] in ("group", "term")):
                scale = unit_scale(unit, metric, where, key)
            else:
                try:
                    scale = parse_unit(unit)[0]
                except UnitError as e:
                    raise SpecError(where, key, str(e), "a unit such as ms or GB") from None
        else:
            expr = body
        value = evaluate_expression(expr, ns, where, key)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if not isinstance(value, str):
            value = float(value) / scale
        return fmt(value, spec)

    out = _PLACEHOLDER.sub(one, text)
    return out.replace("\x00", "{").replace("\x01", "}")


# ---------------------------------------------------------------- the report

FEASIBLE, VIOLATION = "__feasible__", "__violation__"


def _reason(model: StepModel, violation: str) -> str:
    """A sweep names the first failing constraint; say what it means."""
    said = {c.name: c.message for c in model.constraints}
    return f"{violation}: {said[violation]}" if violation in said else violation


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


class Report:
    """One report run: loads the spec, builds the models, renders the blocks."""

    def __init__(self, ref: str | Path, sets: Sequence[str] = (), cwd: Path | None = None):
        self.cwd = cwd or Path.cwd()
        self.ref = str(ref)
        self.path = resolve(self.ref, "reports", where="report", key="", base=self.cwd)
        self.where = self._display(self.path)
        self.doc = read_toml(self.path)
        self.sets = list(sets)
        self.files: set[Path] = {self.path.resolve()}
        self.models: dict[str, StepModel] = {}
        self.ns = Namespace()
        self.derivations: dict[str, Any] = {}
        self.outputs: dict[str, bytes] = {}
        self._cache: dict[tuple[Any, ...], dict[str, np.ndarray]] = {}
        self._allowed(self.doc, "", ("title", "description", "scenarios", "block", "name"))
        self.name = str(self.doc.get("name", self.path.stem))
        self._load_scenarios()

    # ---- helpers

    def _display(self, p: Path) -> str:
        p = p.resolve()
        root = catalog_root().resolve()
        for base, prefix in ((root, "specs/"), (self.cwd.resolve(), "")):
            try:
                return prefix + p.relative_to(base).as_posix()
            except ValueError:
                pass
        return p.name

    def _err(self, key: str, problem: str, expected: str = "") -> SpecError:
        return SpecError(self.where, key, problem, expected)

    def _allowed(self, table: Mapping[str, Any], prefix: str, keys: Sequence[str]) -> None:
        for k in table:
            if k not in keys:
                dym = did_you_mean(k, keys)
                raise self._err(f"{prefix}{k}", f"unknown key{dym}", f"one of: {', '.join(keys)}")

    def _need(self, table: Mapping[str, Any], key: str, prefix: str, what: str) -> Any:
        if key not in table:
            raise self._err(f"{prefix}{key}", "missing", what)
        return table[key]

    def _load_scenarios(self) -> None:
        scen = self.doc.get("scenarios", {})
        if not isinstance(scen, dict) or not scen:
            raise self._err("scenarios", "missing or empty", "[scenarios.ALIAS] tables")
        for alias, entry in scen.items():
            key = f"scenarios.{alias}"
            if not _IDENT.fullmatch(alias):
                raise self._err(key, "alias is not an identifier", "letters, digits, _")
            if isinstance(entry, str):
                entry = {"scenario": entry}
            self._allowed(entry, key + ".", ("scenario", "set", "label"))
            ref = self._need(entry, "scenario", key + ".", "a scenario name or path")
            sets = [*entry.get("set", []), *self.sets]
            try:
                model = build_model(
                    resolve(ref, "scenarios", where=self.where, key=key, base=self.path.parent),
                    sets,
                )
            except SpecError as e:
                raise self._err(key, f"{e.where}:{e.key}: {e.problem}", e.expected) from None
            self.models[alias] = model
            self._track(model)
            self._publish(alias, model)

    def _track(self, model: StepModel) -> None:
        for origin in (model.scenario.origin, *model.scenario.provenance.values()):
            p = Path(origin)
            if origin != "--set" and p.is_file():
                self.files.add(p.resolve())

    def _publish(self, alias: str, model: StepModel) -> None:
        ev = model.evaluate()
        s = self.ns.scalars
        broken = model.violations(ev)
        for name in sweep.metric_names(model):
            if broken and name not in DIAGNOSTIC_METRICS:
                s[f"{alias}.{name}"] = Infeasible(
                    f"scenario {alias} is infeasible ({broken[0].line})"
                )
                continue
            s[f"{alias}.{name}"] = float(np.asarray(sweep.pick(model, ev, name), dtype=float))
        s[f"{alias}.feasible"] = not broken
        for sym, v in model.values.items():
            s[f"{alias}.param.{sym.name}"] = float(v)
        s[f"{alias}.fits"] = bool(ev["memory_bytes_per_gpu"] <= ev["memory_capacity_per_gpu"])
        s[f"{alias}.name"] = model.scenario.name

    def alias(self, name: Any, key: str) -> StepModel:
        if name not in self.models:
            raise self._err(
                key, f"unknown scenario alias {name!r}", f"one of: {', '.join(self.models)}"
            )
        return self.models[name]

    def metric(self, model: StepModel, name: Any, key: str) -> str:
        if not isinstance(name, str) or name not in sweep.metric_names(model):
            dym = did_you_mean(str(name), sweep.metric_names(model))
            raise self._err(
                key,
                f"unknown metric {name!r}{dym}",
                "a metric such as tokens_per_s_per_user, group.moe or term.NAME",
            )
        return name

    def series(
        self, alias: str, key: str | None, values: Sequence[Any], metrics: Sequence[str], at: str
    ) -> dict[str, np.ndarray]:
        """Metrics of ``alias`` along ``key`` (vectorized through the alias's model)."""
        cache_key = (alias, key, repr(values), tuple(metrics))
        if cache_key in self._cache:
            return self._cache[cache_key]
        self._cache[cache_key] = out = self._series(alias, key, values, metrics, at)
        return out

    def _series(
        self, alias: str, key: str | None, values: Sequence[Any], metrics: Sequence[str], at: str
    ) -> dict[str, np.ndarray]:
        model = self.models[alias]
        if key is None:
            ev = model.evaluate()
            out = {
                m: np.atleast_1d(np.asarray(sweep.pick(model, ev, m), dtype=float)) for m in metrics
            }
            broken = model.violations(ev)
            out[FEASIBLE] = np.array([not broken])
            out[VIOLATION] = np.array([broken[0].line if broken else ""], dtype=object)
            return _withheld(out)
        if not isinstance(key, str) or not isinstance(values, list) or not values:
            raise self._err(
                at,
                "needs a key and a non-empty list of values",
                'key = "parallel.tp", values = [8, 16]',
            )
        entry = self.doc["scenarios"][alias]
        ref = entry if isinstance(entry, str) else entry["scenario"]
        scen = resolve(ref, "scenarios", where=self.where, key=at, base=self.path.parent)
        sets = [*([] if isinstance(entry, str) else entry.get("set", [])), *self.sets]
        sets = [s for s in sets if s.partition("=")[0].strip() != key]
        try:
            res = sweep.run(scen, [(key, values)], sets, metrics, model=model)
        except SpecError as e:
            loc = e.key if e.where in ("--set", "--vary") else f"{e.where}:{e.key}"
            raise self._err(at, f"{loc}: {e.problem}", e.expected) from None
        self._track(res.model)
        out = dict(res.results)
        out[FEASIBLE] = np.asarray(res.feasible).reshape(-1)
        out[VIOLATION] = np.asarray(res.violation).reshape(-1)
        return _withheld(out)

    # ---- blocks

    def render(self) -> str:
        """The Markdown (derivations choose closed forms by structure, not time, so a slower
        machine renders the same bytes)."""
        title = self.doc.get("title", self.name)
        lines = [f"# {fill(str(title), self.ns, self.where, 'title')}", ""]
        if "description" in self.doc:
            lines += [
                fill(str(self.doc["description"]).strip(), self.ns, self.where, "description"),
                "",
            ]
        blocks = self.doc.get("block", [])
        if not isinstance(blocks, list):
            raise self._err("block", "not an array of tables", "[[block]] entries")
        # tables and derivations first, so prose anywhere can name their results
        rendered: dict[int, list[str]] = {}
        order = sorted(
            range(len(blocks)),
            key=lambda i: 0 if blocks[i].get("kind") in ("table", "derivation") else 1,
        )
        for i in order:
            b = blocks[i]
            at = f"block[{i}]."
            kind = self._need(b, "kind", at, f"one of: {', '.join(BLOCK_KINDS)}")
            if kind not in BLOCK_KINDS:
                raise self._err(
                    at + "kind", f"unknown block kind {kind!r}", f"one of: {', '.join(BLOCK_KINDS)}"
                )
            rendered[i] = getattr(self, f"_block_{kind}")(b, at)
        for i in range(len(blocks)):
            lines += [*rendered[i], ""]
        lines += self._provenance()
        return "\n".join(lines).rstrip() + "\n"

    def _block_heading(self, b: Mapping[str, Any], at: str) -> list[str]:
        self._allowed(b, at, ("kind", "text", "level"))
        level = int(b.get("level", 2))
        text = fill(str(self._need(b, "text", at, "text")), self.ns, self.where, at + "text")
        return ["#" * level + " " + text]

    def _block_prose(self, b: Mapping[str, Any], at: str) -> list[str]:
        self._allowed(b, at, ("kind", "text"))
        text = str(self._need(b, "text", at, "Markdown with {placeholders}")).strip()
        return [fill(text, self.ns, self.where, at + "text")]

    def _axis(self, spec: Any, at: str) -> list[dict[str, Any]]:
        """An axis: scenarios (aliases), values of a key, or metrics -> labelled entries."""
        if not isinstance(spec, dict):
            raise self._err(
                at,
                "not a table",
                "{ key = …, values = […] }, { scenarios = […] } or { metrics = […] }",
            )
        self._allowed(
            spec,
            at + ".",
            ("key", "values", "scenarios", "metrics", "labels", "label", "units", "formats"),
        )
        labels = spec.get("labels")
        out: list[dict[str, Any]] = []
        if "scenarios" in spec:
            for a in spec["scenarios"]:
                self.alias(a, at + ".scenarios")
            names = list(spec["scenarios"])
            labels = labels or [self._alias_label(a) for a in names]
            out = [{"alias": a} for a in names]
            for extra in ("metrics", "units", "formats"):
                if extra in spec:
                    if len(spec[extra]) != len(out):
                        raise self._err(
                            f"{at}.{extra}",
                            f"{len(spec[extra])} entries for {len(out)} scenarios",
                            "one per scenario",
                        )
                    for entry, v in zip(out, spec[extra], strict=True):
                        entry[extra[:-1]] = v
        elif "key" in spec:
            values = self._need(spec, "values", at + ".", "a list of values")
            tmpl = spec.get("label", "{value}")
            labels = labels or [tmpl.replace("{value}", str(v)) for v in values]
            out = [{"key": spec["key"], "value": v} for v in values]
        elif "metrics" in spec and "scenarios" not in spec:
            ms = list(spec["metrics"])
            units = spec.get("units", [""] * len(ms))
            formats = spec.get("formats", [""] * len(ms))
            labels = labels or ms
            out = [
                {"metric": m, "unit": u, "format": f}
                for m, u, f in zip(ms, units, formats, strict=False)
            ]
        else:
            raise self._err(
                at,
                "names no scenarios, key or metrics",
                "scenarios = […], key + values, or metrics = […]",
            )
        if len(labels) != len(out):
            raise self._err(
                at + ".labels",
                f"{len(labels)} labels for {len(out)} entries",
                "one label per entry",
            )
        for entry, label in zip(out, labels, strict=True):
            entry["label"] = str(label)
        return out

    def _alias_label(self, alias: str) -> str:
        entry = self.doc["scenarios"][alias]
        return entry.get("label", alias) if isinstance(entry, dict) else alias

    def _block_table(self, b: Mapping[str, Any], at: str) -> list[str]:
        self._allowed(
            b,
            at,
            (
                "kind",
                "id",
                "title",
                "rows",
                "columns",
                "scenario",
                "metric",
                "unit",
                "format",
                "caption",
                "corner",
            ),
        )
        tid = self._need(b, "id", at, "an identifier")
        if not _IDENT.fullmatch(str(tid)) or tid in self.ns.tables:
            raise self._err(at + "id", f"{tid!r} is not a new identifier", "a unique identifier")
        rows = self._axis(self._need(b, "rows", at, "an axis"), at + "rows")
        cols = self._axis(self._need(b, "columns", at, "an axis"), at + "columns")
        grid: dict[str, dict[str, float]] = {}
        shown: dict[str, dict[str, str]] = {}
        reasons: dict[str, str] = {}  # row -> the first constraint that fails in it
        for r in rows:
            grid[r["label"]], shown[r["label"]] = {}, {}
        # each (alias, key) pair is one vectorized sweep over all the values it needs
        need: dict[tuple[Any, Any], tuple[list[Any], list[str]]] = {}
        for c in cols:
            for r in rows:
                cell = {**b, **{k: v for k, v in {**r, **c}.items() if k != "label"}}
                alias = cell.get("alias", b.get("scenario"))
                model = self.alias(alias, at + "scenario")
                metric = self.metric(model, cell.get("metric"), at + "metric")
                vals, ms = need.setdefault((alias, cell.get("key")), ([], []))
                if cell.get("key") and cell["value"] not in vals:
                    vals.append(cell["value"])
                if metric not in ms:
                    ms.append(metric)
        for (alias, key), (vals, ms) in need.items():
            self.series(alias, key, vals, ms, at + "rows")
        for c in cols:
            for r in rows:
                cell = {**b, **{k: v for k, v in {**r, **c}.items() if k != "label"}}
                alias = cell.get("alias", b.get("scenario"))
                model = self.alias(alias, at + "scenario")
                metric = self.metric(model, cell.get("metric"), at + "metric")
                unit = cell.get("unit") or ""
                scale = unit_scale(unit, metric, self.where, at + "unit")
                key = cell.get("key")
                allv, allm = need[(alias, key)]
                data = self.series(alias, key, allv, allm, at + "rows")
                j = allv.index(cell["value"]) if key else 0
                v = float(data[metric][j]) / scale
                grid[r["label"]][c["label"]] = v
                if not data[FEASIBLE][j]:
                    reasons.setdefault(r["label"], _reason(model, str(data[VIOLATION][j])))
                    if metric not in DIAGNOSTIC_METRICS:
                        shown[r["label"]][c["label"]] = INFEASIBLE
                        grid[r["label"]][c["label"]] = Infeasible(  # type: ignore[assignment]
                            f"{tid}[{r['label']!r}][{c['label']!r}] is infeasible "
                            f"({reasons[r['label']]})"
                        )
                        continue
                shown[r["label"]][c["label"]] = fmt(v, cell.get("format") or "")
        self.ns.tables[tid] = grid
        corner = str(b.get("corner", ""))
        head = [corner, *(c["label"] + self._unit_suffix(c, b) for c in cols)]
        lines = []
        if "title" in b:
            lines += [f"**{fill(str(b['title']), self.ns, self.where, at + 'title')}**", ""]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join([":---"] + ["---:"] * len(cols)) + "|")
        for r in rows:
            lines.append("| " + " | ".join([r["label"], *shown[r["label"]].values()]) + " |")
        for label, why in reasons.items():
            lines += ["", f"Infeasible ({label}): {why}"]
        lines += ["", f"Data: [{tid}.csv]({tid}.csv)"]
        if "caption" in b:
            lines += ["", fill(str(b["caption"]).strip(), self.ns, self.where, at + "caption")]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(head)
        for r in rows:
            cells = shown[r["label"]]
            w.writerow([
                r["label"],
                *(INFEASIBLE if cells[c["label"]] == INFEASIBLE
                  else csv_number(grid[r["label"]][c["label"]]) for c in cols),
            ])  # fmt: skip
        self.outputs[f"{tid}.csv"] = buf.getvalue().encode()
        return lines

    @staticmethod
    def _unit_suffix(col: Mapping[str, Any], b: Mapping[str, Any]) -> str:
        if "metric" in col:
            return f" [{col['unit']}]" if col.get("unit") else ""
        return ""

    # ---- closed forms and derivations

    def _block_formula(self, b: Mapping[str, Any], at: str) -> list[str]:
        self._allowed(b, at, ("kind", "scenario", "metric", "free", "title", "caption"))
        model = self.alias(self._need(b, "scenario", at, "an alias"), at + "scenario")
        name = self.metric(
            model, self._need(b, "metric", at, "a metric or term.NAME"), at + "metric"
        )
        if name.startswith("term."):
            expr = next(t.expr for t in model.terms if t.name == name[5:])
        elif name.startswith("group."):
            expr = sp.Add(*(t.expr for t in model.terms if t.group == name[6:]))
        else:
            expr = model.metrics[name]
        free = []
        for k in b.get("free", []):
            try:
                sym = symbols.lookup(k).symbol
            except KeyError:
                sym = None
            if sym is None or sym not in model.values:
                raise self._err(
                    at + "free",
                    f"{k!r} is not a parameter of this scenario",
                    "a numeric key such as parallel.tp",
                )
            free.append(sym)
        shown = model.substituted(expr, free)
        tex = sp.latex(shown, symbol_names=symbols.latex_names())
        lines = []
        if "title" in b:
            lines += [f"**{fill(str(b['title']), self.ns, self.where, at + 'title')}**", ""]
        lines += ["$$", tex, "$$"]
        if "caption" in b:
            lines += ["", fill(str(b["caption"]).strip(), self.ns, self.where, at + "caption")]
        return lines

    def _block_derivation(self, b: Mapping[str, Any], at: str) -> list[str]:
        self._allowed(
            b,
            at,
            (
                "kind",
                "id",
                "derive",
                "scenario",
                "other",
                "key",
                "metric",
                "eps",
                "fraction",
                "top",
                "title",
                "caption",
            ),
        )
        did = self._need(b, "id", at, "an identifier")
        if not _IDENT.fullmatch(str(did)) or did in self.derivations:
            raise self._err(at + "id", f"{did!r} is not a new identifier", "a unique identifier")
        what = self._need(b, "derive", at, f"one of: {', '.join(DERIVATIONS)}")
        if what not in DERIVATIONS:
            raise self._err(
                at + "derive", f"unknown derivation {what!r}", f"one of: {', '.join(DERIVATIONS)}"
            )
        model = self.alias(self._need(b, "scenario", at, "an alias"), at + "scenario")
        try:
            from stepwall import derive
        except ImportError:
            raise self._err(
                at + "derive", "stepwall.derive is not installed", "a stepwall with derivations"
            ) from None
        kwargs: dict[str, Any] = {}
        args: list[Any] = [model]
        if what == "crossover":
            args.append(self.alias(self._need(b, "other", at, "an alias"), at + "other"))
        if what in ("wall", "optimum", "crossover", "regime"):
            key = self._need(b, "key", at, "a numeric key such as parallel.tp")
            if not isinstance(key, str) or f"{b['scenario']}.param.{key}" not in self.ns.scalars:
                raise self._err(
                    at + "key",
                    f"{key!r} is not a parameter of this scenario",
                    "a numeric key such as parallel.tp",
                )
            args.append(key)
        for opt in ("metric", "eps", "fraction"):
            if opt in b:
                kwargs[opt] = b[opt]
        if "metric" in kwargs:
            self.metric(model, kwargs["metric"], at + "metric")
        try:
            result = getattr(derive, what)(*args, **kwargs)
        except StepwallError as e:
            raise self._err(at + "derive", str(e)) from None
        self.derivations[did] = result
        if isinstance(result, list):
            return self._derivation_list(b, at, did, what, result)
        s = self.ns.scalars
        for field in (
            "value",
            "feasible_value",
            "closed_form",
            "latex",
            "definition",
            "method",
            "note",
            "kind",
            "key",
        ):
            v = getattr(result, field, None)
            if v is None:
                continue
            if (
                isinstance(v, int | float | np.floating | np.integer) and not isinstance(v, bool)
            ) or (isinstance(v, sp.Basic) and v.is_number):
                s[f"{did}.{field}"] = float(v)
            else:
                s[f"{did}.{field}"] = str(v)
        _flatten_numbers(getattr(result, "details", None) or {}, f"{did}.details", s)
        lines = []
        title = b.get("title", f"{what} of {b['scenario']}")
        lines.append(f"**{fill(str(title), self.ns, self.where, at + 'title')}**")
        lines.append("")
        if getattr(result, "definition", ""):
            lines += [f"Definition: {result.definition}", ""]
        if getattr(result, "latex", ""):
            lines += ["$$", str(result.latex), "$$", ""]
        facts = []
        for field, label in (
            ("value", "value"),
            ("feasible_value", "feasible value"),
            ("method", "method"),
        ):
            v = getattr(result, field, None)
            if v is not None and v != "":
                facts.append(f"{label}: {fmt(v, '.4g') if not isinstance(v, str) else v}")
        if facts:
            lines.append("; ".join(facts))
        if getattr(result, "note", ""):
            lines += ["", f"Note: {result.note}"]
        if "caption" in b:
            lines += ["", fill(str(b["caption"]).strip(), self.ns, self.where, at + "caption")]
        return lines

    def _derivation_list(
        self, b: Mapping[str, Any], at: str, did: str, what: str, results: list[Any]
    ) -> list[str]:
        """Elasticities (one per parameter) or regimes (one per change) as a table."""
        top = int(b.get("top", len(results)))
        shown = results[:top]
        s = self.ns.scalars
        s[f"{did}.count"] = float(len(results))
        for r in results:
            if r.value is not None and what == "elasticity":
                s[f"{did}.{r.key}"] = float(r.value)
        if results and results[0].value is not None:
            s[f"{did}.value"] = float(results[0].value)
        title = b.get("title", f"{what} of {b['scenario']}")
        lines = [f"**{fill(str(title), self.ns, self.where, at + 'title')}**", ""]
        if results and results[0].definition:
            lines += [f"Definition: {results[0].definition}", ""]
        head = ["parameter", "elasticity"] if what == "elasticity" else ["key", "value", "note"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join([":---", "---:", ":---"][: len(head)]) + "|")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(head)
        for r in shown:
            v = "—" if r.value is None else fmt(r.value, "+.3f" if what == "elasticity" else ".4g")
            row = [f"`{r.key}`", v] if what == "elasticity" else [f"`{r.key}`", v, r.note]
            lines.append("| " + " | ".join(row) + " |")
            w.writerow([r.key, csv_number(r.value), *([] if what == "elasticity" else [r.note])])
        if len(shown) < len(results):
            lines += [
                "",
                f"({len(results) - len(shown)} more with smaller magnitude in "
                f"[{did}.csv]({did}.csv))",
            ]
        else:
            lines += ["", f"Data: [{did}.csv]({did}.csv)"]
        for r in results[len(shown) :]:
            w.writerow([r.key, csv_number(r.value), *([] if what == "elasticity" else [r.note])])
        self.outputs[f"{did}.csv"] = buf.getvalue().encode()
        if "caption" in b:
            lines += ["", fill(str(b["caption"]).strip(), self.ns, self.where, at + "caption")]
        return lines

    # ---- plots

    def _block_plot(self, b: Mapping[str, Any], at: str) -> list[str]:
        self._allowed(
            b,
            at,
            (
                "kind",
                "id",
                "plot",
                "title",
                "scenarios",
                "labels",
                "scenario",
                "key",
                "values",
                "metric",
                "unit",
                "mark",
                "logx",
                "xlabel",
                "caption",
                "ylabel",
            ),
        )
        pid = self._need(b, "id", at, "an identifier")
        if not _IDENT.fullmatch(str(pid)) or f"{pid}.svg" in self.outputs:
            raise self._err(at + "id", f"{pid!r} is not a new identifier", "a unique identifier")
        what = self._need(b, "plot", at, f"one of: {', '.join(PLOTS)}")
        if what not in PLOTS:
            raise self._err(at + "plot", f"unknown plot {what!r}", f"one of: {', '.join(PLOTS)}")
        aliases = list(b.get("scenarios", [b["scenario"]] if "scenario" in b else []))
        if not aliases:
            raise self._err(at + "scenarios", "missing", "a list of aliases")
        for a in aliases:
            self.alias(a, at + "scenarios")
        labels = list(b.get("labels", [self._alias_label(a) for a in aliases]))
        title = fill(str(b.get("title", "")), self.ns, self.where, at + "title")
        key, values = b.get("key"), b.get("values", [])
        if what == "breakdown":
            groups = sorted(
                {t.group for a in aliases for t in self.models[a].terms},
                key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else 99, g),
            )
            names = [f"group.{g}" for g in groups]
            bars, stacks = [], []
            for a, lab in zip(aliases, labels, strict=True):
                model = self.models[a]
                present = [n for n in names if n in sweep.metric_names(model)]
                if key:
                    data = self.series(a, key, values, present, at + "key")
                    for j, v in enumerate(values):
                        bars.append(f"{lab}\n{key.split('.')[-1]}={v}")
                        stacks.append(
                            [float(data[n][j]) * 1e3 if n in data else 0.0 for n in names]
                        )
                else:
                    data = self.series(a, None, [], present, at)
                    bars.append(lab)
                    stacks.append([float(data[n][0]) * 1e3 if n in data else 0.0 for n in names])
            svg = plot_breakdown(bars, groups, stacks, title)
        elif what == "metric_vs_key":
            metric = self._need(b, "metric", at, "a metric")
            unit = b.get("unit", "")
            lines_ = []
            for a, lab in zip(aliases, labels, strict=True):
                self.metric(self.models[a], metric, at + "metric")
                scale = unit_scale(unit, metric, self.where, at + "unit")
                data = self.series(a, key, values, [metric], at + "key")
                lines_.append((lab, [float(x) / scale for x in data[metric]]))
            marks = []
            for m in b.get("mark", []):
                ref = f"{m}.value" if "." not in m else m
                v = self.ns.get(ref, self.where, at + "mark")
                marks.append((m.split(".")[0], float(v)))
            ylabel = str(b.get("ylabel", metric))
            ylabel = f"{ylabel} [{unit}]" if unit else ylabel
            svg = plot_metric_vs_key(
                [float(sweep_value(v)) for v in values],
                lines_,
                marks,
                b.get("xlabel", key),
                ylabel,
                title,
                bool(b.get("logx")),
            )
        else:
            pts = []
            for a, lab in zip(aliases, labels, strict=True):
                data = self.series(
                    a, key, values, ["tokens_per_s_per_gpu", "tokens_per_s_per_user"], at + "key"
                )
                pts.append(
                    (
                        lab,
                        list(data["tokens_per_s_per_gpu"]),
                        list(data["tokens_per_s_per_user"]),
                        [str(v) for v in values],
                    )
                )
            svg = plot_latency_throughput(pts, title, str(b.get("xlabel", key or "")))
        self.outputs[f"{pid}.svg"] = svg
        lines = [f"![{title or pid}]({pid}.svg)"]
        if "caption" in b:
            lines += ["", fill(str(b["caption"]).strip(), self.ns, self.where, at + "caption")]
        return lines

    # ---- provenance

    def _provenance(self) -> list[str]:
        lines = ["## Provenance", "", "| spec file | SHA-256 |", "|:---|:---|"]
        shown = sorted((self._display(p), p) for p in self.files)
        for name, p in shown:
            lines.append(f"| `{name}` | `{hashlib.sha256(p.read_bytes()).hexdigest()}` |")
        lines += ["", "| software | version |", "|:---|:---|"]
        for dist in ("stepwall", "sympy", "numpy", "matplotlib"):
            lines.append(f"| {dist} | {_version(dist)} |")
        hooks = registry.default()
        used = {name.rsplit(".", 1)[-1] for name in registry.BUILTIN_PLUGINS}
        for m in self.models.values():
            used |= {t.plugin for t in m.terms}
            used |= {hooks.plugin_of(s, k) for s, k in m.scenario.kinds.items()}
        for row in hooks.describe():  # installed plugins the report did not use are left out
            if row["name"] in used:
                lines.append(f"| plugin {row['name']} | {row['version']} |")
        cmd = ["stepwall", "report", self.ref, *(a for s in self.sets for a in ("--set", s))]
        lines += ["", "Regenerate with:", "", "```", shlex.join(cmd), "```"]
        return lines


# ---------------------------------------------------------------- plots (deterministic SVG)

_RC = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "svg.hashsalt": "stepwall",
    "svg.fonttype": "none",
    "path.simplify": False,
    "axes.prop_cycle": None,
}
_COLORS = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)


def _figure(width: float = 7.0, height: float = 4.0) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from cycler import cycler

    rc = dict(_RC)
    rc["axes.prop_cycle"] = cycler(color=_COLORS)
    plt.rcdefaults()
    plt.rcParams.update(rc)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def _svg(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return buf.getvalue()


def plot_breakdown(
    bars: list[str], groups: list[str], stacks: list[list[float]], title: str
) -> bytes:
    """Stacked bars of step time (ms) by term group, one bar per scenario or key value; an
    infeasible configuration (NaN times) gets no bar and the word "infeasible"."""
    fig, ax = _figure(max(5.0, 1.0 + 0.9 * len(bars)), 4.2)
    x = np.arange(len(bars))
    data = np.array(stacks, dtype=float).reshape(len(bars), len(groups))
    bad = np.isnan(data).any(axis=1)
    data[bad] = 0.0
    bottom = np.zeros(len(bars))
    for j, g in enumerate(groups):
        h = data[:, j]
        ax.bar(x, h, 0.6, bottom=bottom, label=g, color=_COLORS[j % len(_COLORS)])
        bottom += h
    for xi, total, no in zip(x, bottom, bad, strict=True):
        ax.text(xi, total, "infeasible" if no else f"{total:.1f}", ha="center", va="bottom",
                fontsize=8)  # fmt: skip
    ax.set_xticks(x, bars, fontsize=7)
    ax.set_ylabel("step time [ms]")
    top = float(bottom.max()) if len(bars) else 0.0
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    ax.legend(
        fontsize=7,
        ncols=min(len(groups), 6),
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        frameon=False,
    )
    if title:
        ax.set_title(title)
    return _svg(fig)


def plot_metric_vs_key(
    xs: list[float],
    lines: list[tuple[str, list[float]]],
    marks: list[tuple[str, float]],
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool,
) -> bytes:
    """A metric against a key's values, one line per scenario, derived points marked."""
    fig, ax = _figure()
    for label, ys in lines:
        ax.plot(xs, ys, marker="o", markersize=3.5, label=label)
    for name, v in marks:
        ax.axvline(v, color="#444444", linestyle="--", linewidth=0.9)
        ax.annotate(
            f"{name} = {v:.3g}",
            (v, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12),
            textcoords="offset points",
            fontsize=8,
        )
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _svg(fig)


def plot_latency_throughput(
    points: list[tuple[str, list[float], list[float], list[str]]], title: str, what: str
) -> bytes:
    """Per-user speed against per-GPU throughput as a key (usually concurrency) varies."""
    fig, ax = _figure()
    for label, x, y, tags in points:
        ax.plot(x, y, marker="o", markersize=3.5, label=label)
        for xi, yi, t in zip(x, y, tags, strict=True):
            if math.isfinite(xi) and math.isfinite(yi):  # infeasible points are gaps
                ax.annotate(t, (xi, yi), xytext=(3, 3), textcoords="offset points", fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("tokens/s per GPU")
    ax.set_ylabel("tokens/s per user")
    ax.legend(fontsize=8, title=f"labels: {what}" if what else None, title_fontsize=7)
    if title:
        ax.set_title(title)
    return _svg(fig)


def _flatten_numbers(d: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(d, Mapping):
        for k, v in d.items():
            if _IDENT.fullmatch(str(k).replace(".", "_")):
                _flatten_numbers(v, f"{prefix}.{k}", out)
    elif isinstance(d, int | float) and not isinstance(d, bool):
        out[prefix] = float(d)


def sweep_value(v: Any) -> float:
    """A plotted x value: numbers as given, unit strings as SI magnitudes."""
    if isinstance(v, int | float):
        return float(v)
    from stepwall.units import parse_quantity

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
    from stepwall.output import write_folder

    text = report.render()
    return write_folder(out, dict(sorted({"REPORT.md": text.encode(), **report.outputs}.items())))
