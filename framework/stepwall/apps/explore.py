"""The interactive explorer: one static HTML page that runs a scenario's model in the browser.

`explorer_html` compiles the model's metrics, term times and constraints from their sympy
expressions to JavaScript with the same common-subexpression elimination the Python
evaluator gets from ``lambdify(cse=True)`` (so the page does the same floating-point
operations in the same order, and its numbers equal ``stepwall eval``'s), and writes them
into one self-contained page: controls for the free parameters, the metrics, the step-time
breakdown, the constraints that fail, a chart of a metric against a parameter with the wall
or the optimum marked (computed in the page, so it follows the controls), the closed forms
as MathML, and the provenance block of reports. Nothing is fetched: no server, no CDN, no
fonts; the page works opened from ``file://`` without a network. The same inputs give the
same bytes.

The wall follows `stepwall derive SCENARIO wall KEY`: ceilings relaxed, branches held at the
current value of the key, addends growing without bound held there too, then the smallest
N with t(N)/t(∞) − 1 < ε by bisection. For that the page carries the relaxed step time as an
expression graph (`expression_graph`) which a small interpreter in the page resolves.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import sympy as sp
from sympy.printing.jscode import JavascriptCodePrinter
from sympy.printing.mathml import MathMLPresentationPrinter

from stepwall.analyses.common import relax
from stepwall.analyses.elasticity import elasticity
from stepwall.apps.report.render import display_path, provenance, spec_files
from stepwall.core.errors import DimensionError, SpecError, shown_path
from stepwall.core.symbols import Parameter, dim, rebuild
from stepwall.core.units import (
    BANDWIDTH,
    COMPUTE_RATE,
    INFORMATION,
    OPERATION,
    TIME,
    Dim,
)
from stepwall.model.compose import compose_step_time
from stepwall.model.constraints import _NEGATED, HINT_LIMIT
from stepwall.numeric.printer import (
    SharedNames,
    argument_names,
    read_definitions,
    restructured,
    shared_subexpressions,
)
from stepwall.plugin import registry as registries

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel
    from stepwall.plugin.registry import Registry

EPS = 0.15  # the wall's remaining-gain tolerance, as `stepwall derive … wall` defaults it
TOP = 6  # parameters with the largest elasticity offered as controls by default
GROUP_ORDER = ("moe", "dense", "attention", "comm", "base", "spec")
MAX_BYTES = 2_000_000  # the page must stay small enough to mail around
_UNITS = {TIME: "s", INFORMATION: "B", BANDWIDTH: "B/s", OPERATION: "FLOP", COMPUTE_RATE: "FLOP/s"}


# ---------------------------------------------------------------- JavaScript


class _JS(SharedNames, JavascriptCodePrinter):  # type: ignore[misc]  # sympy is untyped
    """sympy's JavaScript printer, made to compute what the Python evaluator computes: floats
    at full precision, Python's modulo (the sign of the divisor), Piecewise as one nested
    conditional, booleans as JavaScript literals."""

    def __init__(
        self,
        names: Mapping[sp.Basic, str] | None = None,
        shared: Mapping[sp.Basic, str] | None = None,
    ) -> None:
        super().__init__({"precision": 17, "order": "none"})  # sums as the evaluator prints them
        self.names, self.shared = dict(names or {}), dict(shared or {})

    def code(self, e: sp.Basic, where: str, defining: bool = False) -> str:
        """``e`` (with ``defining``: a shared subexpression's own definition) in JavaScript;
        a SpecError naming what JavaScript cannot compute."""
        try:
            text: str = self.definition(e) if defining else self.doprint(e)
        except (NotImplementedError, ValueError, TypeError) as err:
            # sympy's message names the function, then tells how to print partial code
            found = re.search(r"Unsupported by [^:]*: (\w+)", str(err))
            what = found.group(1) if found else str(err)
            known = ("Add, Mul, Pow, Min, Max, Piecewise, ceiling, floor, log, exp, Abs, Mod, "
                     "LambertW and relations")  # fmt: skip
            raise SpecError("explore", where, f"{what} cannot be compiled to JavaScript",
                            f"expressions of {known}") from None  # fmt: skip
        return text

    def _print_Float(self, e: sp.Float) -> str:
        v = float(e)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "(-Infinity)"
        return repr(v) if v >= 0 else f"({v!r})"

    def _print_Mod(self, e: sp.Mod) -> str:
        a, b = e.args
        return f"pymod({self._print(a)}, {self._print(b)})"

    def _print_Piecewise(self, e: sp.Piecewise) -> str:
        out, tail = [], "NaN"
        for expr, cond in e.args:
            if cond == sp.true:
                tail = f"({self._print(expr)})"
                break
            out.append(f"({self._print(cond)}) ? ({self._print(expr)}) : ")
        return "(" + "".join(out) + tail + ")"

    def _print_LambertW(self, e: sp.LambertW) -> str:
        branch = e.args[1] if len(e.args) > 1 else sp.Integer(0)
        return f"lambertw({self._print(e.args[0])}, {self._print(branch)})"

    def _print_BooleanTrue(self, e: Any) -> str:
        return "true"

    def _print_BooleanFalse(self, e: Any) -> str:
        return "false"

    def _print_Infinity(self, e: Any) -> str:
        return "Infinity"

    def _print_NegativeInfinity(self, e: Any) -> str:
        return "(-Infinity)"

    def _print_NaN(self, e: Any) -> str:
        return "NaN"


def js_function(
    name: str,
    params: Sequence[sp.Symbol],
    exprs: Sequence[sp.Basic],
    keep: Sequence[int] | None = None,
    prefix: str = "x",
) -> str:
    """A JavaScript function ``name(p)`` of the parameter array ``p`` (in ``params`` order)
    returning ``exprs[i]`` for each i in ``keep`` (default all). The expressions are reduced
    exactly as the Python evaluator's are (`stepwall.numeric.printer.restructured`, then
    `~stepwall.numeric.printer.shared_subexpressions`, parameters named by
    `~stepwall.numeric.printer.argument_names`), so the operations match; subexpressions only the
    dropped outputs need are left out. Raises a SpecError naming a function JavaScript
    cannot compute."""
    names = argument_names(params)
    roots = restructured(list(exprs))
    printer = _JS(names, shared_subexpressions(roots, prefix))
    wanted = list(range(len(exprs))) if keep is None else list(keep)
    outs = [printer.code(roots[i], name) for i in wanted]
    defined = [(n, printer.code(e, name, defining=True)) for e, n in printer.shared.items()]
    body = read_definitions(defined, outs, prefix)
    lines = [f"function {name}(p) {{"]
    read = " ".join([*outs, *(text for _, text in body)])
    used = [(i, n) for i, n in enumerate(names.values()) if re.search(rf"\b{n}\b", read)]
    if used:
        lines.append("  const " + ", ".join(f"{n} = p[{i}]" for i, n in used) + ";")
    lines += [f"  const {n} = {text};" for n, text in body]
    outs_text = ", ".join(outs)
    lines += [f"  return [{outs_text}];", "}"]
    return "\n".join(lines)


# ---------------------------------------------------------------- the relaxed step time


class Unsupported(ValueError):
    """An expression node the page's interpreter does not know."""


_GRAPH_OPS: dict[type, str] = {
    sp.Add: "+",
    sp.Mul: "*",
    sp.Pow: "^",
    sp.Min: "min",
    sp.Max: "max",
    sp.Piecewise: "pw",
    sp.log: "log",
    sp.exp: "exp",
    sp.Abs: "abs",
    sp.ceiling: "ceil",
    sp.floor: "floor",
    sp.Mod: "mod",
    sp.LambertW: "lambertw",
    sp.And: "and",
    sp.Or: "or",
    sp.Not: "not",
    sp.StrictLessThan: "<",
    sp.LessThan: "<=",
    sp.StrictGreaterThan: ">",
    sp.GreaterThan: ">=",
    sp.Equality: "==",
    sp.Unequality: "!=",
}


def expression_graph(expr: sp.Basic, index: Mapping[sp.Symbol, int]) -> list[list[Any]]:
    """``expr`` as a list of nodes, children before parents (the last is the root), shared
    subtrees once: ``["n", number]``, ``["p", parameter index]`` or ``[op, child ids…]``
    (Piecewise: expression, condition, expression, condition, …). Raises `Unsupported`."""
    nodes: list[list[Any]] = []
    ids: dict[sp.Basic, int] = {}

    def visit(e: sp.Basic) -> int:
        hit = ids.get(e)
        if hit is not None:
            return hit
        node: list[Any]
        if isinstance(e, sp.Symbol):
            if e not in index:
                raise Unsupported(f"symbol {e}")
            node = ["p", index[e]]
        elif e == sp.true or e == sp.false:
            node = ["n", 1.0 if e == sp.true else 0.0]
        elif e.is_number and not e.free_symbols and not isinstance(e, sp.Piecewise):
            v = float(e)
            if not math.isfinite(v):
                raise Unsupported(f"number {e}")
            node = ["n", v]
        elif type(e) in _GRAPH_OPS:
            if isinstance(e, sp.Piecewise):
                kids = [visit(x) for pair in e.args for x in pair]
            else:
                kids = [visit(a) for a in e.args]
            node = [_GRAPH_OPS[type(e)], *kids]
        else:
            raise Unsupported(type(e).__name__)
        ids[e] = len(nodes)
        nodes.append(node)
        return ids[e]

    visit(sp.sympify(expr))
    return nodes


# ---------------------------------------------------------------- MathML

_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "pi": "π",
    "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Delta": "Δ", "Gamma": "Γ", "Lambda": "Λ", "Phi": "Φ", "Sigma": "Σ", "Omega": "Ω",
}  # fmt: skip
_LATEX = re.compile(r"(\\mathrm\{(?P<rm>[^{}]*)\}|\\(?P<greek>[A-Za-z]+)|(?P<plain>[A-Za-z]))"
                    r"(?:_\{(?P<sub>[^{}]*)\}|_(?P<sub1>[A-Za-z0-9]))?")  # fmt: skip


def _latex_text(s: str) -> str:
    return re.sub(r"\\mathrm\{([^{}]*)\}", r"\1", s).replace("\\_", "_").replace("\\,", " ")


class _MathML(MathMLPresentationPrinter):  # type: ignore[misc]  # sympy is untyped
    """sympy's presentation-MathML printer with parameters shown by their LaTeX names
    (``N_{tp}``), other symbols by a given name, numbers to four significant digits, a
    Piecewise as a brace of cases and Mod as ``mod``."""

    def __init__(self, names: Mapping[sp.Symbol, tuple[str, str]] | None = None) -> None:
        super().__init__({"mul_symbol": "dot"})
        self.names = dict(names or {})

    def _el(self, tag: str, text: str | None = None, *kids: Any, **attrs_: str) -> Any:
        el = self.dom.createElement(tag)
        for k, v in attrs_.items():
            el.setAttribute(k, v)
        if text is not None:
            el.appendChild(self.dom.createTextNode(text))
        for k in kids:
            el.appendChild(k)
        return el

    def _print_Symbol(self, sym: sp.Symbol, style: str = "plain") -> Any:
        if sym in self.names:
            base, sub = self.names[sym]
            mi = self._el("mi", base)
            return self._el("msub", None, mi, self._el("mtext", sub)) if sub else mi
        if isinstance(sym, Parameter):
            m = _LATEX.fullmatch(sym.latex.strip())
            if m:
                if m.group("rm") is not None:
                    base = self._el("mi", _latex_text(m.group("rm")), mathvariant="normal")
                elif m.group("greek") is not None:
                    base = self._el("mi", _GREEK.get(m.group("greek"), m.group("greek")))
                else:
                    base = self._el("mi", m.group("plain"))
                sub = m.group("sub") if m.group("sub") is not None else m.group("sub1")
                if sub:
                    return self._el("msub", None, base, self._el("mi", _latex_text(sub),
                                                                 mathvariant="normal"))  # fmt: skip
                return base
            return self._el("mi", sym.name.rpartition(".")[2], mathvariant="normal")
        return super()._print_Symbol(sym, style)

    def _print_Float(self, e: sp.Float) -> Any:
        v = float(e)
        if v.is_integer() and abs(v) < 1e6:
            return self._el("mn", str(int(v)))
        text = f"{v:.4g}"
        if "e" not in text:
            return self._el("mn", text)
        mant, _, exp = text.partition("e")
        ten = self._el("msup", None, self._el("mn", "10"), self._el("mn", str(int(exp))))
        if mant in ("1", "-1"):
            return ten if mant == "1" else self._el("mrow", None, self._el("mo", "−"), ten)
        return self._el("mrow", None, self._el("mn", mant), self._el("mo", "·"), ten)

    def _print_Piecewise(self, e: sp.Piecewise) -> Any:
        table = self._el("mtable", None, columnalign="left left")
        for expr, cond in e.args:
            when = (
                self._el("mtext", "otherwise")
                if cond == sp.true
                else self._el("mrow", None, self._el("mtext", "if\u2009"), self._print(cond))
            )
            row = self._el("mtr", None, self._el("mtd", None, self._print(expr)),
                           self._el("mtd", None, when))  # fmt: skip
            table.appendChild(row)
        return self._el("mrow", None, self._el("mo", "{", stretchy="true"), table)

    def _print_Mod(self, e: sp.Mod) -> Any:
        a, b = e.args
        return self._el("mrow", None, self._print(a), self._el("mo", "mod"), self._print(b))


def mathml(expr: sp.Basic, names: Mapping[sp.Symbol, tuple[str, str]] | None = None,
           display: bool = False) -> str:  # fmt: skip
    """``expr`` as presentation MathML (a ``<math>`` element)."""
    body = _MathML(names).doprint(expr)
    mode = ' display="block"' if display else ""
    return f"<math{mode}>{body}</math>"


def shown_form(model: StepModel, expr: sp.Expr, free: Iterable[sp.Symbol]) -> sp.Expr:
    """``expr`` with every parameter but ``free`` replaced by its value (6 digits, as `stepwall
    expr` shows it) and unit factors (1.0·x) dropped."""

    def node(e: sp.Basic, args: tuple[sp.Basic, ...]) -> sp.Basic | None:
        if isinstance(e, sp.Mul) and any(a == 1 and a.is_Float for a in args):
            rest = [a for a in args if not (a == 1 and a.is_Float)]
            return sp.Mul(*rest) if rest else sp.Integer(1)
        return None

    keep = set(free)
    values = {s: sp.Float(v, 6) for s, v in model.values.items() if s not in keep}
    out: sp.Expr = rebuild(expr, values, node)
    return out


# ---------------------------------------------------------------- controls


@attrs.frozen
class Control:
    """A free parameter in the page: its value (SI), how it is shown (``unit``, SI per unit
    = 10**``exponent``), its slider range (SI) and where its value came from."""

    path: str
    value: float
    unit: str
    exponent: int
    lo: float
    hi: float
    log: bool
    integer: bool
    minimum: float
    inclusive: bool
    maximum: float | None
    dimensionless: bool
    si_unit: str  # the SI unit `--set` takes the value in ("" for a number)
    doc: str
    source: str
    file: str
    symbol: str
    elasticity: float | None = None

    @property
    def element_id(self) -> str:
        return "control-" + self.path.replace(".", "-")


def display_unit(value: float, dim: Dim) -> tuple[str, int]:
    """The unit a value is shown in, as `stepwall.core.units.format_quantity` chooses it (``TB/s``,
    ``ms``), and its power of ten."""
    unit = _UNITS.get(dim)
    if unit is None:
        return ("" if dim.dimensionless else str(dim)), 0
    v = abs(value)
    if unit == "s":
        for exp, pre in ((0, ""), (-3, "m"), (-6, "µ"), (-9, "n")):
            if v >= 10.0**exp or exp == -9:
                return f"{pre}s", exp
    for exp, pre in ((15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, "")):
        if v >= 10.0**exp or exp == 0:
            return f"{pre}{unit}", exp
    raise AssertionError("unreachable")


def slider_range(model: StepModel, path: str, value: float, integer: bool) -> tuple[float, float]:
    """The range `stepwall derive` scans for a key (``key_range``): [1, 4·cluster GPUs] for a
    parallel degree, [1, 4096] for the users per replica, [1, 16·x] for other counts,
    [x/16, 16·x] otherwise."""
    by = {s.name: float(v) for s, v in model.values.items()}
    if value == 0:
        return 0.0, 16.0 if integer else 1.0
    if integer and path.startswith("parallel."):
        nodes, per_node = (model.provides.get(r, "") for r in ("nodes", "gpus_per_node"))
        gpus = by.get(nodes, 1.0) * by.get(per_node, 1.0)
        return 1.0, float(max(4 * gpus, 16 * value))
    if path == model.provides.get("users"):
        return 1.0, max(4096.0, 16 * value)
    if integer:
        return 1.0, max(16 * value, 16.0)
    return value / 16, value * 16


def default_free(model: StepModel, top: int = TOP,
                 elastic: Sequence[tuple[str, float]] | None = None) -> list[str]:  # fmt: skip
    """The layout degrees (whole-number ``parallel.*`` keys), the users per replica (the
    workload's ``users``: ``workload.concurrency``), then the ``top`` parameters with the
    largest |elasticity| of step time; structural keys and constants are left out
    (`controllable`)."""
    candidates = controllable(model)
    out = sorted(p for p in candidates if p.startswith("parallel.") and _is_integer(model, p))
    users = model.provides.get("users")
    if users in candidates:
        out.append(users)
    ranked = elasticities(model) if elastic is None else elastic
    extra = [p for p, _ in ranked if p in candidates and p not in out][:top]
    return out + extra


def controllable(model: StepModel) -> set[str]:
    """Numeric spec keys the page can vary: not constants, not structural (a structural key
    decides which terms exist, so the expression holds only at its value)."""
    return {
        s.name
        for s in model.parameters
        if model.scenario.field(s.name) is not None and s.name not in model.structural_keys
    }


def elasticities(model: StepModel) -> list[tuple[str, float]]:
    """(path, elasticity of step time) by decreasing magnitude, nonzero and finite ones;
    empty where the point has none (e.g. a metric is not finite)."""

    try:
        found = elasticity(model)
    except (ValueError, TypeError, ZeroDivisionError, SpecError):
        return []
    return [(d.key, float(d.value)) for d in found
            if d.value is not None and math.isfinite(d.value) and d.value != 0]  # fmt: skip


def _is_integer(model: StepModel, path: str) -> bool:
    f = model.scenario.field(path)
    return bool(f is not None and f.metadata.get("integer"))


def make_controls(
    model: StepModel, free: Sequence[str], elastic: Mapping[str, float] | None = None
) -> list[Control]:
    """One `Control` per path in ``free`` (checked: a parameter of the scenario, not
    structural, not a constant); ``elastic`` gives each one's elasticity for its tooltip."""
    allowed = controllable(model)
    elastic = elastic or {}
    out = []
    for path in dict.fromkeys(free):
        sym = model.parameter(path, "--free")
        if path in model.structural_keys:
            raise SpecError("--free", path, "decides which terms the model has (a plugin reads "
                            "its value while building it): the page cannot vary it",
                            f"set it with --set {path}=… and explore the rest")  # fmt: skip
        if path not in allowed:
            raise SpecError("--free", path, "is a constant, not a spec value",
                            "a spec key such as parallel.tp")  # fmt: skip
        f = model.scenario.field(path)
        meta = dict(f.metadata) if f is not None else {}
        value = float(model.values[sym])
        integer = bool(meta.get("integer"))
        lo, hi = slider_range(model, path, value, integer)
        low, maximum = float(meta.get("minimum", 0.0)), meta.get("maximum")
        lo = max(lo, low)
        if maximum is not None:
            hi = min(hi, float(maximum))
        lo, hi = min(lo, value), max(hi, value)
        unit, exponent = display_unit(value, sym.dim)
        out.append(
            Control(
                path,
                value,
                unit,
                exponent,
                lo,
                hi,
                lo > 0 and hi / lo >= 8,
                integer,
                low,
                bool(meta.get("inclusive", False)),
                None if maximum is None else float(maximum),
                bool(sym.dim.dimensionless),
                "" if sym.dim.dimensionless else str(sym.dim),
                sym.doc or str(meta.get("doc", "")),
                model.scenario.sources.get(path, ""),
                shown_path(model.scenario.file_of(path)),
                mathml(sym),
                elastic.get(path),
            )
        )
    return out


# ---------------------------------------------------------------- constraints in words


def _unit_kind(expr: sp.Basic) -> str:
    """How `stepwall.model.constraints` formats a side of this dimension: a unit of
    ``format_quantity``, "" (a bare number) or the dimension's text."""

    try:
        d = dim(expr)
    except DimensionError:
        return ""
    if d.dimensionless:
        return ""
    return _UNITS.get(d, "dim:" + str(d))


def explanation(model: StepModel, c: Any, sides: list[sp.Basic]) -> dict[str, Any]:
    """How the page says a violated constraint in words, as `stepwall.model.compose.violation`
    does: a tree whose leaves index ``sides`` (expressions the page evaluates)."""

    blamed = c.keys[0] if c.keys else ""

    def side(e: sp.Basic, label: str = "") -> dict[str, Any]:
        sides.append(e)
        return {
            "j": len(sides) - 1,
            "str": str(e),
            "unit": _unit_kind(e),
            "label": label,
            "number": bool(e.is_Number),
            "symbol": e.name if e.is_Symbol else "",
        }

    def walk(rel: sp.Basic) -> dict[str, Any]:
        if isinstance(rel, sp.And):
            parts = []
            for a in rel.args:
                sides.append(a)
                parts.append({"holds": len(sides) - 1, "node": walk(a)})
            return {"k": "and", "parts": parts}
        if isinstance(rel, sp.Or):
            return {"k": "or", "parts": [walk(a) for a in rel.args]}
        if isinstance(rel, sp.Eq) and isinstance(rel.lhs, sp.Mod) and rel.rhs == 0:
            size, ranks = rel.lhs.args
            return {
                "k": "mod",
                "size": side(size),
                "ranks": side(ranks),
                "ranks_blamed": bool(ranks.is_Symbol and ranks.name == blamed),
            }
        if isinstance(rel, sp.core.relational.Relational):
            return {
                "k": "rel",
                "op": _NEGATED.get(rel.rel_op, f"violates {rel.rel_op}"),
                "lhs": side(rel.lhs, c.labels[0]),
                "rhs": side(rel.rhs, c.labels[1]),
            }
        text = "the relation can never hold" if rel == sp.false else f"{rel} does not hold"
        return {"k": "text", "text": text}

    return walk(c.relation)


# ---------------------------------------------------------------- the page


def _term_names(model: StepModel) -> tuple[sp.Expr, dict[sp.Symbol, tuple[str, str]]]:
    """The step time composed from one symbol per term (t with the term's name below)."""

    names: dict[sp.Symbol, tuple[str, str]] = {}
    stand_ins = []
    for i, t in enumerate(model.terms):
        sym = Parameter(f"term.t{i}", TIME)
        names[sym] = ("t", t.name)
        stand_ins.append(attrs.evolve(t, expr=sym))
    return compose_step_time(stand_ins), names


def _asset(name: str) -> str:
    """The page's script or style, shipped beside this module (package data)."""

    return Path(__file__).with_name(name).read_text(encoding="utf-8")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _script_json(doc: Any) -> str:
    """JSON safe inside a <script> element."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def explorer_html(
    model: StepModel,
    free: Sequence[str] | None = None,
    *,
    registry: Registry | None = None,
    command: str = "",
    top: int = TOP,
    eps: float = EPS,
    chart_key: str = "",
    title: str = "",
) -> bytes:
    """The explorer page of ``model`` (UTF-8 bytes): controls for ``free`` (default
    `default_free`), everything else at the scenario's values. ``command`` is the one that
    regenerates the page, shown with the provenance. Same inputs, same bytes.

    Stays whole: it gathers one page document whose parts (the compiled JavaScript,
    constraints, controls, chart key) are each made by a named helper and only put together
    here.
    """

    registry = registry or registries.default()
    if not 0 < eps < 10:
        raise SpecError("explore", "--eps", f"{eps} is not a useful tolerance", "0 < eps < 10")
    elastic = elasticities(model)
    paths = list(free) if free else default_free(model, top, elastic)
    controls = make_controls(model, paths, dict(elastic))
    if not controls:
        raise SpecError("explore", "--free", "no parameter to vary", "e.g. --free parallel.tp")
    params = model.parameters
    index = {s: i for i, s in enumerate(params)}
    # the metrics the specs give (energy and cost need a board power or a price: where they
    # are absent the metric is unknown and the page leaves it out)
    shown = [m for m in model.declared_metrics if m.name in model.metrics]
    metrics = [m.name for m in shown]
    # the same list, in the same order, that `stepwall.model.compose.compile_model` lambdifies
    # (NaN for
    # an unknown metric), so that sympy's cse makes the same subexpressions; ops and unknown
    # metrics are computed there, dropped here
    names = [m.name for m in model.declared_metrics]
    exprs = [model.metrics.get(m, sp.nan) for m in names] + [t.expr for t in model.terms]
    ops = [e for op in model.workload.ops for e in (op.bytes, op.flops)]
    rels = [c.relation for c in model.constraints]
    n_out = len(exprs)
    keep = [
        *(i for i, m in enumerate(names) if m in model.metrics),
        *range(len(names), n_out),
        *range(n_out + len(ops), n_out + len(ops) + len(rels)),
    ]
    model_js = js_function("stepwallModel", params, [*exprs, *ops, *rels], keep)
    sides: list[sp.Basic] = []
    constraints = [
        {
            "name": c.name,
            "plugin": c.plugin,
            "message": c.message,
            "keys": list(c.keys),
            "explain": explanation(model, c, sides),
        }
        for c in model.constraints
    ]
    sides_js = js_function("stepwallSides", params, sides or [sp.Integer(0)], prefix="y")
    wall: dict[str, Any] | None

    try:
        wall = {"nodes": expression_graph(relax(model.step_time), index)}
    except Unsupported as e:
        wall = {"unsupported": str(e)}
    control_paths = [c.path for c in controls]
    # by default the layout's TP degree, else its EP degree (the keys its kind gives them)
    degrees = [d.name for d in (model.layout.tp, model.layout.ep) if isinstance(d, sp.Symbol)]
    key = chart_key or next((p for p in degrees if p in control_paths), control_paths[0])
    if key not in control_paths:
        raise SpecError("explore", "--chart", f"{key} is not among the controls",
                        ", ".join(control_paths))  # fmt: skip
    terms = [{"name": t.name, "group": t.group, "plugin": t.plugin, "overlap": t.overlap,
              "why": t.why} for t in model.terms]  # fmt: skip
    rank = {g: i for i, g in enumerate(GROUP_ORDER)}
    groups = sorted({t.group for t in model.terms}, key=lambda g: (rank.get(g, 99), g))
    page_controls = [
        {"path": c.path, "id": c.element_id, "unit": c.unit, "exp": c.exponent, "value": c.value,
         "lo": c.lo, "hi": c.hi, "log": c.log, "integer": c.integer, "min": c.minimum,
         "inclusive": c.inclusive, "max": c.maximum, "dimensionless": c.dimensionless,
         "si_unit": c.si_unit}
        for c in controls
    ]  # fmt: skip
    doc = {
        "scenario": model.scenario.label,
        "eps": eps,
        "parameters": [{"path": s.name, "value": float(model.values[s])} for s in params],
        "metrics": metrics,
        "units": {m.name: m.unit for m in shown},
        # unknown is not infeasible (eval's feasibility leaves these out), and configuration
        # metrics keep their meaning where the point is infeasible (not greyed)
        "optional": [m.name for m in shown if m.optional],
        "diagnostic": [m.name for m in shown if m.diagnostic],
        "labels": {m.name: m.label for m in shown},
        "help": {m.name: f"{m.name}: {m.meaning}" if m.page_help else m.name for m in shown},
        "better": {m.name: -1 if m.minimize else 1 for m in shown if m.objective},
        "terms": terms,
        "groups": groups,
        "constraints": constraints,
        "hint_limit": HINT_LIMIT,
        # the keys that give the cluster's nodes and GPUs per node (its kind's fields)
        "cluster_keys": [model.provides.get(r, "") for r in ("nodes", "gpus_per_node")],
        "users_key": model.provides.get("users", ""),  # the workload's users per replica
        "controls": page_controls,
        "chart": {"key": key, "metric": "step_time_s"},
        "wall": wall,
    }
    page = _page(model, controls, doc, model_js, sides_js, registry, command, title)
    data = page.encode("utf-8")
    if len(data) > MAX_BYTES:
        raise SpecError("explore", "-o", f"the page would be {len(data):,} bytes",
                        f"at most {MAX_BYTES:,}: fewer --free parameters")  # fmt: skip
    return data


def _provenance_html(model: StepModel, registry: Registry, command: str) -> str:
    cwd = Path.cwd()
    files, software = provenance(spec_files(model), lambda p: display_path(p, cwd), registry,
                                 [model], ("stepwall", "sympy", "numpy"))  # fmt: skip
    rows = "".join(f"<tr><td><code>{_esc(n)}</code></td><td><code>{_esc(h)}</code></td></tr>"
                   for n, h in files)  # fmt: skip
    soft = "".join(f"<tr><td>{_esc(n)}</td><td>{_esc(v)}</td></tr>" for n, v in software)
    out = [
        '<section id="provenance"><h2>Provenance</h2>',
        f'<table class="prov"><thead><tr><th>spec file</th><th>SHA-256</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>",
        f'<table class="prov"><thead><tr><th>software</th><th>version</th></tr></thead>'
        f"<tbody>{soft}</tbody></table>",
    ]
    if command:
        out.append(f"<p>Regenerate with:</p><pre><code>{_esc(command)}</code></pre>")
    out.append("</section>")
    return "".join(out)


def _sum_rows(
    lhs: sp.Symbol, total: sp.Expr, names: Mapping[sp.Symbol, tuple[str, str]], per_row: int = 4
) -> str:
    """``lhs = total`` with the sum broken over rows of ``per_row`` addends (MathML has no
    line breaking in browsers), an overlap's Max on a row of its own."""
    printer = _MathML(names)
    order = {sym: i for i, sym in enumerate(names)}  # the terms' order in the model
    args = sp.Add.make_args(total)
    plain = sorted((a for a in args if a in order), key=lambda a: order[a])
    rows = [plain[i : i + per_row] for i in range(0, len(plain), per_row)]
    rows += [[a] for a in args if a not in order]  # an overlap's Max
    out = []
    for i, row in enumerate(rows):
        cells = "<mo>+</mo>".join(printer.doprint(a) for a in row)
        head = printer.doprint(lhs) + "<mo>=</mo>" if i == 0 else "<mo>+</mo>"
        out.append(f'<div class="sumrow{"" if i == 0 else " cont"}"><math><mrow>{head}{cells}'
                   "</mrow></math></div>")  # fmt: skip
    return "".join(out)


def _closed_form_html(model: StepModel, controls: Sequence[Control]) -> str:
    free = [model.parameter(c.path) for c in controls]
    composed, names = _term_names(model)
    t_step = sp.Symbol("t_step")
    lines = [
        '<section id="closed-form"><h2>Closed form</h2>',
        "<p>The step time is the sum of the terms (terms that share an overlap tag count "
        "once, as the longest lane). Each term below is in the controls' symbols; every other "
        "parameter is replaced by its spec value (6 digits). Open a term to see it.</p>",
        f'<div class="formula">{_sum_rows(t_step, composed, names)}</div>',
        '<ul class="terms-math">',
    ]
    for t in model.terms:
        shown = shown_form(model, t.expr, free)
        lines.append(
            f'<li><details><summary><code>{_esc(t.name)}</code> <span class="muted">'
            f"({_esc(t.group)}, plugin {_esc(t.plugin)})</span></summary>"
            f'<div class="formula" title="{_esc(t.why)}">'
            f"{mathml(shown)}</div></details></li>"
        )
    lines.append("</ul>")
    legend = "".join(
        f"<tr><td>{c.symbol}</td><td><code>{_esc(c.path)}</code></td><td>{_esc(c.doc)}</td></tr>"
        for c in controls
    )
    lines.append(f'<table class="legend"><tbody>{legend}</tbody></table></section>')
    return "".join(lines)


def _tooltip(c: Control) -> str:
    shown = _shown_value(c.value, c.exponent)
    unit = f" {c.unit}" if c.unit else ""
    bits = [f"{c.path}: {c.doc}" if c.doc else c.path, f"spec value: {shown}{unit} ({c.file})"]
    if c.source:
        bits.append(f"source: {c.source}")
    if c.elasticity is not None:
        bits.append(f"elasticity of step time: {c.elasticity:+.3f}")
    span = f"{_shown_value(c.lo, c.exponent)}–{_shown_value(c.hi, c.exponent)}{unit}"
    bits.append(f"slider range: {span}" + (" (log)" if c.log else ""))
    return "\n".join(bits)


def _shown_value(si: float, exponent: int) -> str:
    v = float(f"{si / 10.0**exponent:.12g}")
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def _controls_html(controls: Sequence[Control]) -> str:
    out = []
    for c in controls:
        cid = c.element_id
        unit = f'<span class="unit">{_esc(c.unit)}</span>' if c.unit else ""
        step = "1" if c.integer and c.exponent == 0 else "any"
        out.append(
            f'<div class="control" data-path="{_esc(c.path)}" title="{_esc(_tooltip(c))}">'
            f'<label for="{cid}"><span class="sym">{c.symbol}</span>'
            f'<span class="path">{_esc(c.path)}</span>{unit}</label>'
            f'<div class="row"><input type="range" id="slider-{cid[8:]}" min="0" max="1000" '
            f'step="1" aria-label="{_esc(c.path)} slider">'
            f'<input type="number" id="{cid}" step="{step}" '
            f'value="{_shown_value(c.value, c.exponent)}" data-value="{c.value!r}" '
            f'data-path="{_esc(c.path)}"></div></div>'
        )
    return "".join(out)


def _page(
    model: StepModel,
    controls: Sequence[Control],
    doc: Mapping[str, Any],
    model_js: str,
    sides_js: str,
    registry: Registry,
    command: str,
    title: str,
) -> str:
    try:
        version = metadata.version("stepwall")
    except metadata.PackageNotFoundError:
        version = "unknown"
    label = model.scenario.label
    heading = title or f"{label}"
    options = "".join(
        f'<option value="{_esc(c.path)}"{" selected" if c.path == doc["chart"]["key"] else ""}>'
        f"{_esc(c.path)}</option>"
        for c in controls
    )
    metric_options = "".join(
        f'<option value="{m}"{" selected" if m == "step_time_s" else ""}>'
        f"{_esc(doc['labels'][m])}</option>"
        for m in doc["metrics"]
        if m not in ("gpus", "memory_capacity_per_gpu")
    )
    body = _BODY.format(
        heading=_esc(heading),
        version=_esc(version),
        controls=_controls_html(controls),
        key_options=options,
        metric_options=metric_options,
        eps=_esc(f"{doc['eps']:g}"),
        closed_form=_closed_form_html(model, controls),
        provenance=_provenance_html(model, registry, command),
    )
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f'<meta name="generator" content="stepwall {_esc(version)}">\n',
            f"<title>stepwall explorer: {_esc(label)}</title>\n",
            f"<style>\n{_asset('explore.css')}</style>\n</head>\n<body>\n",
            body,
            f'\n<script type="application/json" id="stepwall-data">{_script_json(doc)}</script>\n',
            f'<script>\n"use strict";\n{_MODEL_HELPERS}\n{model_js}\n{sides_js}\n</script>\n',
            f"<script>\n{_asset('explore.js')}</script>\n</body>\n</html>\n",
        ]
    )


_MODEL_HELPERS = """\
// Python's float modulo (the result takes the divisor's sign), as the evaluator computes it
function pymod(a, b) { const r = a % b; return (r !== 0 && (r < 0) !== (b < 0)) ? r + b : r; }
// Lambert's W on its real branches (k = 0: x >= -1/e; k = -1: -1/e <= x < 0), NaN elsewhere
// (complex there): a series or asymptotic start, then Halley's iteration to full precision
function lambertw(x, k) {
  const b = -1 / Math.E;
  if (Number.isNaN(x) || x < b || (k !== 0 && k !== -1)) return NaN;
  if (x === b) return -1;
  let w;
  if (k === 0) {
    if (x === 0 || x === Infinity) return x;
    if (x < -0.3) { const p = Math.sqrt(2 * (Math.E * x + 1)); w = -1 + p - p * p / 3; }
    else if (x < 3) { const l = Math.log1p(x); w = l * (1 - Math.log1p(l) / (2 + l)); }
    else { const l = Math.log(x); w = l - Math.log(l) + Math.log(l) / l; }
  } else {
    if (x >= 0) return x === 0 ? -Infinity : NaN;
    if (x < -0.25) { const p = -Math.sqrt(2 * (Math.E * x + 1)); w = -1 + p - p * p / 3; }
    else { const l1 = Math.log(-x), l2 = Math.log(-l1); w = l1 - l2 + l2 / l1; }
  }
  for (let i = 0; i < 100; i++) {
    const e = Math.exp(w), f = w * e - x, w1 = w + 1;
    if (f === 0 || w1 === 0) break;
    const d = f / (e * w1 - (w + 2) * f / (2 * w1));
    w -= d;
    if (!(Math.abs(d) > 4e-16 * Math.abs(w))) break;
  }
  return w;
}"""

_BODY = """\
<header><h1>{heading}</h1><span class="sub" title="the closed-form model compiled into this \
page; every number is computed here, from the specs, as stepwall eval computes it; nothing is \
fetched">stepwall explorer · the closed-form model compiled into this page; every number is \
computed here, from the specs, as <code>stepwall eval</code> computes it · works offline</span>\
</header>
<main>
<section id="controls-panel"><div class="panel-head"><h2>Parameters</h2>\
<button type="button" id="reset">reset to spec</button></div>
<div id="controls">{controls}</div>
<p class="hint">Drag a slider or type a value (in the unit shown). Hover a parameter for its \
meaning, its spec value and the cited source.</p></section>
<section id="results">
<div id="status"></div>
<div class="cards" id="metrics"></div>
<div class="panel" id="breakdown-panel"><div class="panel-head"><h2>Step time by term group</h2>\
<span id="breakdown-total" class="muted"></span></div>
<div id="breakdown-bar"></div><div id="breakdown-legend"></div>
<details id="terms-details"><summary>Terms</summary><table id="terms-table"><thead><tr>\
<th>term</th><th>group</th><th>plugin</th><th class="num">time</th><th class="num">share</th>\
</tr></thead><tbody></tbody></table></details></div>
<div class="panel" id="constraints-panel"><div class="panel-head"><h2>Constraints</h2>\
<span id="constraints-status" class="muted"></span></div><ul id="violations"></ul></div>
<div class="panel" id="chart-panel"><div class="panel-head"><h2>Chart</h2>
<label>metric <select id="chart-metric">{metric_options}</select></label>
<label>against <select id="chart-key">{key_options}</select></label></div>
<svg id="chart" role="img" aria-label="metric against parameter"></svg>
<p id="chart-note" class="note"></p></div>
</section>
</main>
<section id="more">
<details id="how"><summary>How this page computes</summary><p>The model's metrics, term times \
and constraints were compiled from their sympy expressions to the JavaScript in this file \
(common subexpressions shared exactly as <code>stepwall eval</code>'s compiled function shares \
them), so the numbers here equal <code>stepwall eval --json --set KEY=VALUE</code> at the same \
settings. The <b>wall</b> is <code>stepwall derive SCENARIO wall KEY</code>'s: the smallest N \
with t(N)/t(∞) − 1 &lt; ε (ε = {eps}), on the step time with ceilings relaxed \
(⌈x⌉ → max(x, 1)), every Min, Max and Piecewise held at the branch active at the key's current \
value, and addends that grow without bound in the key (latencies ∝ N or log N) held at their \
value there; t(∞) is that function far out (10¹² times the current value), N by bisection. For \
a whole-number key the chart also names the first whole N at or above it where every \
constraint holds (from the exact model). The <b>optimum</b> of a throughput is the largest \
value over the plotted points where every constraint holds. Each control update recomputes \
them.</p></details>
{closed_form}
{provenance}
<p class="muted small">Made by stepwall {version}. Element ids for tools: \
<code>#metric-NAME</code>, <code>#group-NAME</code>, <code>#term-NAME</code> and \
<code>#control-PATH</code> (dots written as hyphens) carry full-precision values in \
<code>data-value</code>; <code>#violations</code> lists failed constraints.</p>
</section>"""
