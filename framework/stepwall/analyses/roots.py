"""Closed-form roots chosen by the equation's structure, exact where one exists and
asymptotic (in a named regime, with its error) where none does.

After the branches are resolved, an equation F(x) = 0 in the key x is a sum of rational terms
in x plus, through the expected-distinct-experts law E·(1 − (1 − k/E)^T) with T ∝ x, powers
``b^(αx+β)``. Each such power is ``b^β·U`` with ``U = e^{λx}``, ``λ = α·ln b`` (`split`); the
numerator, denominators cleared, is then a polynomial in x and the U's, and its monomials
decide the form (`exact_roots`):

* no U: a polynomial in x of low degree (``sp.roots``), or ``a + b·ln x`` → ``x = e^{−a/b}``;
* one U, ``a + c·U``: ``x = ln(−a/c)/λ`` (a logarithm);
* one U, ``a + b·x + c·U``: with ``y = x + a/b``, ``(−λy)·e^{−λy} = z``, so
  ``x = −a/b − W_k(z)/λ``, ``z = (λc/b)·e^{−λa/b}`` (Corless et al. 1996, "On the Lambert W
  function"); real for ``z ≥ −1/e``: one root (k = 0) for ``z ≥ 0``, two (k = 0 and k = −1)
  for ``−1/e ≤ z < 0``;
* one U, ``a + (c + d·x)·U``: ``x = W_k(z)/λ − c/d``, ``z = −(aλ/d)·e^{λc/d}``;
* both ``b·x`` and ``d·x·U``, or several U's: no closed form (a generalised Lambert W).

Where none exists, `closed_root` tries every regime that leaves an exact form: each U either
kept, **saturated** (``U → 0``; valid where ``e^{λx} ≪ 1``, for the experts law "all experts
hit") or taken to **first order** (``U ≈ 1 + λx``; valid where ``|λx| ≪ 1``, "few experts
hit"), at most one kept. It returns the regime whose root is nearest the exact numeric root,
with that relative error, the validity measure at the root and a first-order error estimate
(one Newton step on the exact equation) that needs no numeric root. All of this is decided by
structure and counted work (`MAX_OPS`, at most `MAX_RATES` exponentials), never by time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import sympy as sp

from stepwall.analyses.result import Equation
from stepwall.core.symbols import Parameter, latex_names, rebuild
from stepwall.numeric.printer import compile_function

MAX_OPS = 3000  # larger equations are not handed to sympy
MAX_RATES = 3  # regimes are enumerated over at most this many distinct exponentials (3^n)
NEGLIGIBLE = 1e-11  # a monomial this small against the largest, at the root, is float noise
MATCH = 1e-4  # a closed-form root within this relative distance of the numeric one is it
MAX_ERROR = 0.25  # an asymptotic root further than this from the exact one is not offered


@attrs.frozen
class Rate:
    """One exponential in x, ``U = e^{λx}``: ``atom`` is how the equation wrote it."""

    lam: sp.Expr
    atom: sp.Expr


@attrs.frozen
class Split:
    """The numerator of F as Σ c·x^i·Π U_j^k_j: ``terms`` maps (i, k_1, …) to c."""

    terms: Mapping[tuple[int, ...], sp.Expr]
    rates: tuple[Rate, ...]


@attrs.frozen
class Root:
    """A closed-form root: the expression, how it was obtained (``form``), the branch of W
    and the conditions under which the form gives a real root."""

    expr: sp.Expr
    form: str  # polynomial | log-linear | logarithm | Lambert W
    branch: str = ""  # W0 | W-1
    conditions: str = ""


@attrs.frozen
class Approximation:
    """An asymptotic root: the regime (which exponentials were saturated or linearised), what
    was replaced, its validity condition with the measure at the exact root (≪ 1 is valid),
    the relative error against the exact root and a first-order estimate of it."""

    regime: str
    approximation: str
    validity: str
    measure: float
    value: float
    error: float
    estimate: float
    choice: tuple[tuple[float, str], ...] = ()  # (λ at the point, keep | sat | lin) per U


@attrs.frozen
class ClosedRoot:
    """What `closed_root` found: the root's closed form, its value, the approximation (None
    when exact) and the check that the closed form solves the equation (|F| relative)."""

    root: Root
    value: float
    approximation: Approximation | None = None
    residual: float = 0.0


# ---------------------------------------------------------------- splitting


def split(eq: sp.Expr, x: sp.Symbol, values: Mapping[sp.Basic, float] | None = None) -> Split | str:
    """F's numerator (denominators cleared) as a polynomial in x and ``U_j = e^{λ_j x}``, one
    U per distinct rate; or why it is not one (an exponent not linear in x, a base that
    depends on x, x left elsewhere, e.g. in a logarithm). Monomials negligible against the
    largest at ``values`` (which includes x at the root) are float noise and dropped.

    Stays whole: the rewrite's nested helpers collect the rates and their symbols, by which the
    numerator's monomials are then keyed and pruned.
    """
    rates: list[Rate] = []
    us: list[sp.Dummy] = []
    problems: list[str] = []

    def unit(lam: sp.Expr, atom: sp.Expr) -> sp.Dummy:
        for r, u in zip(rates, us, strict=True):
            if _same(r.lam, lam):
                return u
        rates.append(Rate(lam, atom))
        us.append(sp.Dummy(f"U{len(us)}", positive=True))
        return us[-1]

    def node(e: sp.Basic, args: tuple[sp.Basic, ...]) -> sp.Basic | None:
        if isinstance(e, sp.exp) and x in args[0].free_symbols:
            base, expo = sp.E, args[0]
        elif isinstance(e, sp.Pow) and x in args[1].free_symbols:
            base, expo = args
        else:
            return None
        alpha = sp.diff(expo, x)
        # an exponential of x inside the exponent (a U already) is not linear in x either
        if (x in base.free_symbols or x in alpha.free_symbols
                or (alpha.free_symbols | base.free_symbols) & set(us)):  # fmt: skip
            problems.append(f"{e} is not b^(α·{x} + β)")
            return None
        beta = sp.expand(expo - alpha * x)
        lam = alpha if base == sp.E else alpha * sp.log(base)
        u = unit(lam, base ** (alpha * x))
        return u if beta == 0 else base**beta * u

    replaced = rebuild(eq, {}, node)
    if problems:
        return problems[0]
    num, _ = replaced.as_numer_denom()
    num = sp.expand(num)
    gens = [x, *us]
    terms: dict[tuple[int, ...], sp.Expr] = {}
    for term in sp.Add.make_args(num):
        powers = term.as_powers_dict()
        key = []
        for g in gens:
            k = sp.sympify(powers.get(g, 0))
            if not (isinstance(k, sp.Integer) and k >= 0):
                return f"{g} appears with power {k}"
            key.append(int(k))
        coeff = term / sp.Mul(*(g**k for g, k in zip(gens, key, strict=True)))
        if coeff.free_symbols & set(gens):
            return f"{x} appears outside powers and exponentials (e.g. in a logarithm)"
        terms[tuple(key)] = terms.get(tuple(key), sp.Integer(0)) + coeff
    terms = {k: c for k, c in terms.items() if c != 0}
    if values is not None and x in values and terms:
        at = {**values}
        try:
            lams = [float(_num(r.lam, at)) for r in rates]
        except TypeError:  # a rate that the values leave symbolic is no constant rate
            return f"an exponential's rate in {x} is not a constant"
        xv = float(at[x])

        def size(k: tuple[int, ...], c: sp.Expr) -> float:
            v = abs(_num(c, at)) * xv ** k[0]
            return float(
                v * math.exp(sum(n * lam * xv for n, lam in zip(k[1:], lams, strict=True)))
            )

        try:
            sizes = {k: size(k, c) for k, c in terms.items()}
        except (OverflowError, TypeError, ValueError):
            sizes = {}  # not judged at the root: every monomial kept
        top = max(sizes.values(), default=0.0)
        terms = {k: c for k, c in terms.items() if not sizes or sizes[k] > NEGLIGIBLE * top}
    # a common factor x^m or U^m is not a root of interest (x > 0, U > 0): divide it out
    if terms:
        low = [min(k[i] for k in terms) for i in range(len(gens))]
        terms = {tuple(a - b for a, b in zip(k, low, strict=True)): c for k, c in terms.items()}
    # exponentials whose monomials were all dropped are gone
    used = [j for j in range(len(us)) if any(k[1 + j] for k in terms)]
    terms = {(k[0], *(k[1 + j] for j in used)): c for k, c in terms.items()}
    return Split(terms, tuple(rates[j] for j in used))


def _same(a: sp.Expr, b: sp.Expr) -> bool:
    if a.is_number and b.is_number:
        return math.isclose(float(a), float(b), rel_tol=1e-12)
    return bool(sp.expand(a - b) == 0)


def _num(e: sp.Expr, values: Mapping[sp.Basic, float]) -> float:
    v = sp.sympify(e).xreplace({k: sp.Float(val, 15) for k, val in values.items()})
    return float(v if isinstance(v, float | int) else v.evalf())


def rebuilt(s: Split, x: sp.Symbol, repl: Sequence[sp.Expr] | None = None) -> sp.Expr:
    """Σ c·x^i·Π u_j^k_j with ``u_j`` = ``repl[j]`` (default: e^{λ_j x}, the exact form)."""
    us = list(repl) if repl is not None else [sp.exp(r.lam * x) for r in s.rates]
    return sp.Add(
        *(
            c * x ** k[0] * sp.Mul(*(u**n for u, n in zip(us, k[1:], strict=True)))
            for k, c in s.terms.items()
        )
    )


# ---------------------------------------------------------------- exact forms


def exact_roots(
    eq: sp.Expr, x: sp.Symbol, values: Mapping[sp.Basic, float] | None = None
) -> list[Root] | str:
    """Every closed-form root the structure allows (see the module doc), or why there is
    none. ``values`` (the other symbols, and x at the numeric root if known) pick the real
    branches of W and drop float noise; roots are not yet filtered for sign."""
    eq = sp.sympify(eq)
    if sp.count_ops(eq) > MAX_OPS:
        return f"the equation has over {MAX_OPS} operations: no closed form attempted"
    if eq.has(sp.Piecewise, sp.Min, sp.Max, sp.ceiling, sp.floor):
        return "branches remain in the equation: no closed form attempted"
    s = split(eq, x, values)
    if isinstance(s, str):
        log_form = _log_linear(eq, x)
        if log_form is not None:
            return log_form
        return f"not polynomial in {x} after clearing denominators, nor linear in log({x}) ({s})"
    if not s.rates:
        return _polynomial(s, x)
    if len(s.rates) > 1:
        return (
            f"{len(s.rates)} exponentials in {x} with different rates "
            f"({', '.join(str(r.atom) for r in s.rates)}): no closed form"
        )
    return _lambert(s, x, values or {})


def _polynomial(s: Split, x: sp.Symbol) -> list[Root] | str:
    poly = sp.Add(*(c * x ** k[0] for k, c in s.terms.items()))
    deg = max((k[0] for k in s.terms), default=0)
    has_symbols = bool(poly.free_symbols - {x})
    if deg < 1:
        return f"the equation does not depend on {x}"
    if deg > (2 if has_symbols else 4):
        return f"a polynomial of degree {deg} in {x}: no closed form attempted"
    return [Root(r, "polynomial") for r in sp.roots(sp.Poly(poly, x), multiple=True)]


def _log_linear(eq: sp.Expr, x: sp.Symbol) -> list[Root] | None:
    """a + b·log(x) = 0 -> x = exp(-a/b) (a tree collective's log2 N against a constant)."""
    u = sp.Dummy("u")
    e = sp.expand(sp.expand_log(eq, force=True)).subs(sp.log(x), u)
    if x in e.free_symbols or not e.is_polynomial(u) or sp.Poly(e, u).degree() != 1:
        return None
    b, a = sp.Poly(e, u).all_coeffs()
    return [Root(sp.exp(-a / b), "log-linear")]


def _lambert(s: Split, x: sp.Symbol, values: Mapping[sp.Basic, float]) -> list[Root] | str:
    lam = s.rates[0].lam
    if not set(s.terms) <= {(0, 0), (1, 0), (0, 1), (1, 1)}:
        degs = ", ".join(f"{x}^{i}·U^{k}" for i, k in sorted(s.terms))
        return (
            f"not of the form a + b·{x} + (c + d·{x})·e^(λ{x}) (monomials {degs}, "
            f"U = {s.rates[0].atom}): no closed form"
        )
    zero = sp.Integer(0)
    a, b, c, d = (s.terms.get(k, zero) for k in ((0, 0), (1, 0), (0, 1), (1, 1)))
    if b == 0 and d == 0:  # a + c·U = 0
        return [Root(sp.log(-a / c) / lam, "logarithm", "", "−a/c > 0")]
    if b != 0 and d != 0:
        return (
            f"both {x} and {x}·e^(λ{x}) appear (a generalised Lambert W, "
            f"U = {s.rates[0].atom}): no closed form"
        )
    if d == 0:  # a + b·x + c·U = 0
        z = lam * c / b * sp.exp(-lam * a / b)

        def make(w: sp.Expr) -> sp.Expr:
            return -a / b - w / lam

        shape = "a + b·x + c·e^(λx) = 0: x = −a/b − W(z)/λ, z = (λc/b)·e^(−λa/b)"
    else:  # a + (c + d·x)·U = 0
        z = -(a * lam / d) * sp.exp(lam * c / d)

        def make(w: sp.Expr) -> sp.Expr:
            return w / lam - c / d

        shape = "a + (c + d·x)·e^(λx) = 0: x = W(z)/λ − c/d, z = −(aλ/d)·e^(λc/d)"
    try:
        zv = _num(z, values)
    except (TypeError, ValueError):
        return f"the argument of W cannot be evaluated at the point ({shape})"
    if not math.isfinite(zv):
        return f"the argument of W is not finite at the point ({shape})"
    if zv < -1 / math.e:
        return f"no real root: z = {zv:.4g} < −1/e ({shape})"
    zz = sp.Float(zv, 15) if z.is_number else z
    w0 = sp.LambertW(zz, evaluate=False)
    if zv >= 0:
        return [Root(make(w0), "Lambert W", "W0", f"{shape}; z = {zv:.4g} ≥ 0: one real root (W0)")]
    both = f"{shape}; −1/e ≤ z = {zv:.4g} < 0: two real roots, W0 and W−1"
    wm1 = sp.LambertW(zz, -1, evaluate=False)
    return [Root(make(w0), "Lambert W", "W0", both), Root(make(wm1), "Lambert W", "W-1", both)]


# ---------------------------------------------------------------- choosing a root


def value_of(root: Root, values: Mapping[sp.Basic, float]) -> float | None:
    """The root's real value at ``values``; None when complex or not a number."""
    try:
        v = complex(sp.sympify(root.expr).xreplace(
            {k: sp.Float(val, 15) for k, val in values.items()}).evalf())  # fmt: skip
    except (TypeError, ValueError):
        return None
    if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)) or not math.isfinite(v.real):
        return None
    return v.real


def nearest(
    roots: Sequence[Root], r: float, values: Mapping[sp.Basic, float]
) -> tuple[Root, float] | None:
    """The real root nearest ``r`` (ties: the first), with its value."""
    best: tuple[Root, float] | None = None
    for root in roots:
        v = value_of(root, values)
        if v is not None and (best is None or abs(v - r) < abs(best[1] - r)):
            best = (root, v)
    return best


def closed_root(
    eq: sp.Expr,
    x: sp.Symbol,
    r: float,
    values: Mapping[sp.Basic, float] | None = None,
    names: Callable[[Rate], tuple[str, str, str]] | None = None,
    only: Sequence[tuple[float, str]] | None = None,
) -> tuple[ClosedRoot | None, str]:
    """The closed form of the root of ``eq`` = 0 at the numeric root ``r``: exact if the
    structure allows one that matches r (checked: |F| at it, relative to F's terms), else the
    asymptotic regime whose root is nearest r. ``values`` are the other symbols' values;
    ``names(rate)`` gives (saturated regime name, first-order regime name, how to print the
    exponential); ``only`` restricts the regimes to one choice (an `Approximation.choice`,
    to redo a numeric choice on the symbolic equation). Returns (None, why) when neither
    exists; with an asymptotic root, the second item says why there is no exact one."""
    vals = dict(values or {})
    at_root = {**vals, x: r}
    why = ""
    if only is None or all(c == "keep" for _, c in only):
        found = exact_roots(eq, x, at_root)
        why = found if isinstance(found, str) else ""
        if not isinstance(found, str):
            hit = nearest(found, r, vals)
            if hit is not None and abs(hit[1] - r) <= MATCH * max(1.0, abs(r)):
                return ClosedRoot(hit[0], hit[1], None, residual(eq, x, hit[1], vals)), ""
            why = "no closed-form root matches the numeric root" if found else "no root"
    if sp.count_ops(eq) > MAX_OPS:
        return None, why
    s = split(eq, x, at_root)
    if isinstance(s, str) or not s.rates:
        return None, why
    if len(s.rates) > MAX_RATES:
        return None, f"{why}; {len(s.rates)} exponentials: regimes not enumerated"
    approx = _asymptotic(eq, s, x, r, vals, names, only)
    if approx is None:
        return None, (
            f"{why}; no regime (an exponential saturated or to first order) gives a closed-form "
            f"root within {MAX_ERROR:.0%} of the numeric one"
        )
    return approx, f"no exact closed form ({why}): the root in its nearest regime" if why else ""


def _asymptotic(
    eq: sp.Expr,
    s: Split,
    x: sp.Symbol,
    r: float,
    vals: Mapping[sp.Basic, float],
    names: Callable[[Rate], tuple[str, str, str]] | None,
    only: Sequence[tuple[float, str]] | None = None,
) -> ClosedRoot | None:
    """The closed-form root with each exponential kept, saturated (→ 0) or linearised (≈ 1 +
    λx): of the choices that give a root near ``r`` within MAX_ERROR, the most accurate (None
    if none).

    Stays whole: one loop over the choices whose filters, root and approximation text all
    belong to one candidate.
    """
    label = names or (lambda rate: ("saturated", "first order", str(rate.atom)))
    lams = [_num(rate.lam, vals) for rate in s.rates]
    best: tuple[tuple[float, int, int], ClosedRoot] | None = None
    for order, choice in enumerate(itertools.product(("keep", "sat", "lin"), repeat=len(s.rates))):
        if choice.count("keep") == len(choice) or choice.count("keep") > 1:
            continue
        if only is not None and not all(
            any(math.isclose(lam, lo, rel_tol=1e-9) and c == co for lo, co in only)
            for c, lam in zip(choice, lams, strict=True)
        ):
            continue
        if any(c == "sat" and lam >= 0 for c, lam in zip(choice, lams, strict=True)):
            continue  # a growing exponential does not saturate
        repl = [
            sp.exp(rate.lam * x) if c == "keep" else sp.Integer(0) if c == "sat"
            else 1 + rate.lam * x
            for c, rate in zip(choice, s.rates, strict=True)
        ]  # fmt: skip
        found = exact_roots(rebuilt(s, x, repl), x, {**vals, x: r})
        if isinstance(found, str):
            continue
        hit = nearest(found, r, vals)
        if hit is None or hit[1] <= 0:
            continue
        root, v = hit
        error = abs(v - r) / abs(r)
        if error > MAX_ERROR:
            continue
        parts, valid, measures = [], [], []
        for c, rate, lam in zip(choice, s.rates, lams, strict=True):
            sat, lin, text = label(rate)
            if c == "sat":
                m = float(math.exp(lam * r))
                parts.append((sat, f"{text} → 0"))
                valid.append(f"{text} ≪ 1 ({m:.3g} at the root)")
                measures.append(m)
            elif c == "lin":
                m = float(abs(lam * r))
                parts.append((lin, f"{text} ≈ 1 + λ·{x}, λ = {_show(rate.lam)}"))
                valid.append(f"|λ·{x}| ≪ 1 ({m:.3g} at the root)")
                measures.append(m)
        kept = [label(rate)[2] for c, rate in zip(choice, s.rates, strict=True) if c == "keep"]
        if kept:
            parts.append(("", f"{kept[0]} kept exact"))
        approx = Approximation(
            "; ".join(p[0] for p in parts if p[0]),
            "; ".join(p[1] for p in parts),
            "; ".join(valid),
            max(measures),
            float(v),
            float(error),
            newton_estimate(eq, x, v, vals),
            tuple(zip(lams, choice, strict=True)),
        )
        rank = (round(error, 12), len(measures), order)
        if best is None or rank < best[0]:
            best = (rank, ClosedRoot(root, v, approx, residual(eq, x, v, vals)))
    return None if best is None else best[1]


def _show(e: sp.Expr) -> str:
    return f"{float(e):.6g}" if e.is_number else str(e)


def residual(eq: sp.Expr, x: sp.Symbol, v: float, values: Mapping[sp.Basic, float]) -> float:
    """|F(v)| relative to the largest of F's addends at v: 0 at an exact root, up to float
    noise."""
    at = {**values, x: v}
    parts = [_num(a, at) for a in sp.Add.make_args(sp.sympify(eq))]
    scale = max((abs(p) for p in parts), default=0.0)
    return abs(sum(parts)) / scale if scale else abs(sum(parts))


def newton_estimate(eq: sp.Expr, x: sp.Symbol, v: float, values: Mapping[sp.Basic, float]) -> float:
    """|F(v)/F'(v)|/v on the exact equation: the first-order distance from an approximate
    root v to the exact one, relative (no numeric root needed)."""
    free = sorted(values, key=str)
    fn = compile_function([x, *free], [eq, sp.diff(eq, x)], "math")
    try:
        f, df = fn(v, *(values[k] for k in free))
    except (ValueError, ZeroDivisionError, OverflowError):
        return math.nan
    return abs(f / df) / abs(v) if df else math.inf


def describe(cr: ClosedRoot) -> dict[str, Any]:
    """The JSON-able account of a closed root: its form and, when asymptotic, the regime."""
    out: dict[str, Any] = {"form": cr.root.form, "exact": cr.approximation is None}
    if cr.root.branch:
        out["branch"] = cr.root.branch
    if cr.root.conditions:
        out["conditions"] = cr.root.conditions
    out["residual"] = cr.residual
    return out


# ---------------------------------------------------------------- presenting


def rounded(expr: sp.Expr, digits: int = 6) -> sp.Expr:
    """``expr`` with every float shown to ``digits`` significant digits, W kept unevaluated
    (its argument is a number: sympy would otherwise evaluate it)."""

    def node(e: sp.Basic, args: tuple[sp.Basic, ...]) -> sp.Basic | None:
        return sp.LambertW(*args, evaluate=False) if isinstance(e, sp.LambertW) else None

    floats = {f: sp.Float(f, digits) for f in sp.sympify(expr).atoms(sp.Float)}
    return rebuild(expr, floats, node)


def presented(cr: ClosedRoot) -> tuple[str, str, str, dict[str, Any], dict[str, Any] | None]:
    """(closed form, LaTeX, srepr, form, regime) of a closed root, for a `Derivation`: text and
    LaTeX with 6 significant digits (more where fewer would move the value by over 1e-6),
    srepr at full precision."""

    shown = cr.root.expr
    for digits in (6, 8, 10, 12):  # fewest digits that keep the value (W's terms can cancel)
        shown = rounded(cr.root.expr, digits)
        as_printed = {f: sp.Float(str(f), 15) for f in shown.atoms(sp.Float)}
        try:
            printed = float(sp.N(shown.xreplace(as_printed)))
        except TypeError:  # symbols left: nothing to compare
            break
        if math.isclose(printed, cr.value, rel_tol=1e-6):
            break
    else:
        shown = cr.root.expr
    latex = sp.latex(shown, symbol_names=latex_names([shown]))
    regime = None
    if cr.approximation is not None:
        a = cr.approximation
        regime = {
            "name": a.regime,
            "approximation": a.approximation,
            "validity": a.validity,
            "measure": a.measure,
            "value": a.value,
            "error": a.error,
            "estimate": a.estimate,
        }
    return str(shown), latex, sp.srepr(cr.root.expr), describe(cr), regime


# ---------------------------------------------------------------- naming regimes

# Exponentials a law puts in the step time, recognised by the parameters of their base, and
# the names of their two regimes: the expected-distinct-experts law E·(1 − (1 − k/E)^T)
# (`stepwall.core.laws.expected_distinct_experts`) saturates when every expert is hit and is
# linear in T while few are.
LAW_REGIMES: dict[frozenset[str], tuple[str, str]] = {
    frozenset({"model.experts_per_token", "model.n_experts"}): (
        "all experts hit",
        "few experts hit",
    ),
}


def rate_namer(
    F: sp.Expr,
    x: sp.Symbol,
    values: Mapping[sp.Basic, float],
    names: Mapping[sp.Basic, tuple[str, str]] | None = None,
) -> Callable[[Rate], tuple[str, str, str]]:
    """Names for the exponentials of the numeric equation, read from the symbolic one ``F``:
    a law's regime names (`LAW_REGIMES`) and the side (``names``: symbol -> (path, side))."""
    names = names or {}
    known: list[tuple[float, tuple[str, str], str]] = []
    for node in sp.preorder_traversal(F):
        if isinstance(node, sp.Pow) and x in node.exp.free_symbols:
            base = node.base
        elif isinstance(node, sp.exp) and x in node.args[0].free_symbols:
            base = sp.E
        else:
            continue
        expo = node.exp if isinstance(node, sp.Pow) else node.args[0]
        alpha = sp.diff(expo, x)
        lam = alpha * (sp.log(base) if base != sp.E else 1)
        try:
            lv = _num(lam, values)
        except (TypeError, ValueError, KeyError):
            continue
        paths = {names.get(s, (s.name, ""))[0] for s in base.free_symbols}
        sides = sorted({names.get(s, ("", ""))[1] for s in base.free_symbols} - {""})
        regimes = LAW_REGIMES.get(frozenset(paths), ("saturated", "first order"))
        known.append((lv, regimes, f" [{', '.join(sides)}]" if sides else ""))

    def name(rate: Rate) -> tuple[str, str, str]:
        text = str(rounded(rate.atom))
        try:
            lv = float(rate.lam)
        except TypeError:
            return "saturated", "first order", text
        for v, (sat, lin), side in known:
            if math.isclose(v, lv, rel_tol=1e-6):
                return sat + side, lin + side, text
        return "saturated", "first order", text

    return name


Shown = tuple[str, str, str, dict[str, Any], dict[str, Any] | None]


def closed_for(eq: Equation, r: float, symbolic: bool) -> tuple[ClosedRoot | None, str, Shown]:
    """The closed form of a recorded equation's root r (exact or asymptotic), found on the
    numeric equation (every parameter at its value), and how to show it (`presented`). With
    ``symbolic``, the same form redone keeping the parameters (a second scenario's merged
    into the first's where path and value agree), if sympy can within `MAX_OPS`; otherwise
    the numbers, and the note says why."""
    at = {k: sp.Float(v, 15) for k, v in eq.values.items()}
    namer = rate_namer(eq.F, eq.x, eq.values, eq.names)
    cr, why = closed_root(rebuild(eq.F, at), eq.x, r, {}, namer)
    if cr is None:
        return None, why, ("", "", "", {}, None)
    shown = presented(cr)
    if not symbolic:
        return cr, why, shown
    own = {k.name: k for k in eq.values if isinstance(k, Parameter)}
    merge = {
        k: own[eq.names[k][0]]
        for k, v in eq.values.items()
        if not isinstance(k, Parameter) and k in eq.names and eq.names[k][0] in own
        and eq.values[own[eq.names[k][0]]] == v
    }  # fmt: skip
    vals = {k: v for k, v in eq.values.items() if k not in merge}
    only = cr.approximation.choice if cr.approximation is not None else None
    sym_cr, sym_why = closed_root(rebuild(eq.F, merge), eq.x, r, vals, namer, only)
    if sym_cr is not None and sym_cr.root.form == cr.root.form:
        if sp.count_ops(sym_cr.root.expr) <= MAX_OPS:
            closed, latex, srepr, _, _ = presented(sym_cr)
            return cr, why, (closed, latex, srepr, shown[3], shown[4])
        sym_why = f"the symbolic closed form has over {MAX_OPS} operations"
    why = (why + "; " if why else "") + (
        f"symbolic form not found ({sym_why or 'another form'}); numbers shown"
    )
    return cr, why, shown
