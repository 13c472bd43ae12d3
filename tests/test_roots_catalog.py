"""Issue 15 on the catalog: the EP-vs-DP crossovers in closed form, and every root's
sensitivities against a finite-difference re-derivation.

A sensitivity ∂ln x*/∂ln p comes from implicit differentiation of the root's defining
equation; the check perturbs p by ±1% in the scenario's values, derives the root again with
the analysis (bisection or its own closed form, never the sensitivity code) and takes the
central difference. The two agree within 1% for every parameter tested (those with
|elasticity| ≥ 0.05 that take any value: a whole-number count perturbed by 1% leaves the
catalog's constraints, e.g. divisibility).
"""

from __future__ import annotations

import csv
import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import sympy as sp

from stepwall.analyses import Derivation
from stepwall.analyses.crossover import crossover, side_names
from stepwall.analyses.optimum import optimum
from stepwall.analyses.regime import regime
from stepwall.analyses.sensitivity import attach
from stepwall.analyses.wall import wall
from stepwall.model.compose import StepModel, build_model

ROOT = Path(__file__).resolve().parents[1]
STEP = 1e-2  # ±1% (the values enter the numeric root rounded to 6 digits)
MIN_TESTED = 4


def whole(model: StepModel) -> Callable[[str], bool]:
    def is_whole(path: str) -> bool:
        f = model.scenario.field(path)
        return f is not None and bool(f.metadata.get("integer"))

    return is_whole


def perturbed(model: StepModel, path: str, factor: float) -> StepModel:
    """The same model with one parameter's value scaled (the expressions are symbolic in it)."""
    vals = dict(model.scenario.values)
    p = model.scenario.by_path[path]
    vals[p] = vals[p] * factor
    return attrs.evolve(model, scenario=attrs.evolve(model.scenario, values=vals))


def check_against_finite_differences(
    d: Derivation, rederive: Callable[[str, str, float], float | None], most: int = 6
) -> int:
    """The ``most`` largest sensitivities of ``d`` (of parameters that take any value, with
    |elasticity| ≥ 0.05) each equal the central difference of the re-derived root; returns
    how many were tested."""
    assert d.value is not None and d.sensitivities, d.sensitivity_note
    tested = 0
    for s in d.sensitivities:
        if s.whole or abs(s.elasticity) < 0.05:
            continue
        if tested == most:
            break
        up, down = rederive(s.parameter, s.side, 1 + STEP), rederive(s.parameter, s.side, 1 - STEP)
        assert up is not None and down is not None, s
        fd = (math.log(up) - math.log(down)) / (math.log(1 + STEP) - math.log(1 - STEP))
        assert s.elasticity == pytest.approx(fd, rel=0.01), s
        tested += 1
    return tested


def check_closed_form(d: Derivation) -> None:
    """The closed form is exact and evaluates to the root, or asymptotic within 5% with its
    stated error being the true one; its srepr is the same expression."""
    assert d.value is not None and d.method in ("symbolic", "asymptotic"), d.note
    shown = float(sp.sympify(d.closed_form).evalf())
    full = float(sp.sympify(d.srepr).evalf())
    assert shown == pytest.approx(full, rel=1e-5)  # the text rounds to 6 digits
    if d.method == "symbolic":
        assert d.regime is None and full == pytest.approx(d.value, rel=1e-4)
        assert d.form is not None and d.form["residual"] < 1e-9
    else:
        assert d.regime is not None and d.regime["error"] <= 0.05
        assert full == pytest.approx(d.regime["value"], rel=1e-9)
        assert d.regime["error"] == pytest.approx(abs(full - d.value) / d.value, rel=1e-6)


def crossover_check(one: StepModel, two: StepModel, metric: str) -> tuple[Derivation, int]:
    key = "workload.concurrency"
    d = attach(crossover(one, two, key, metric), whole=whole(one))
    check_closed_form(d)
    first, second = side_names(one, two)

    def rederive(path: str, side: str, f: float) -> float | None:
        a = perturbed(one, path, f) if side in (first, "both") else one
        b = perturbed(two, path, f) if side in (second, "both") else two
        return crossover(a, b, key, metric).value

    return d, check_against_finite_differences(d, rederive)


def test_the_issue_crossover_ep72_against_dp9_tp8() -> None:
    ep, dp = build_model("k26-gb300nvl72-ep72"), build_model("k26-hgxb300-dp9-tp8")
    d, tested = crossover_check(ep, dp, "tokens_per_s_per_gpu")
    assert tested >= MIN_TESTED
    sides = {s.side for s in d.sensitivities}
    assert {ep.scenario.name, dp.scenario.name, "both"} <= sides


def test_the_shipped_report_crossover() -> None:
    """The report's EP-vs-DP derivation block, on the aliases its spec defines."""
    spec = tomllib.loads((ROOT / "specs/reports/k26-cluster-scaling.toml").read_text())
    block = next(b for b in spec["block"] if b.get("id") == "ep_vs_dp")

    def alias(name: str) -> StepModel:
        a = spec["scenarios"][name]
        return build_model(a["scenario"], tuple(a.get("set", ())))

    _, tested = crossover_check(alias(block["scenario"]), alias(block["against"]),
                                block.get("metric", "tokens_per_s_per_gpu"))  # fmt: skip
    assert tested >= MIN_TESTED


def test_an_asymptotic_crossover_two_expert_rates() -> None:
    """EP-8 (one token per user) against TP-8 DDTree (M tokens per user): two exponentials
    with different rates, no exact form; the nearest regime's root within 5%."""
    one = build_model("k26-gb300nvl72-ep8-plateau")
    two = build_model("k26-b300-tp8-ddtree-native")
    d, tested = crossover_check(one, two, "tokens_per_s_per_gpu")
    assert d.method == "asymptotic" and d.regime is not None, d.note
    assert "experts hit" in d.regime["name"] and "2 exponentials" in d.note
    assert tested >= MIN_TESTED


def test_the_tp_wall() -> None:
    b300 = build_model("k26-b300-tp8-ddtree")
    d = attach(wall(b300, "parallel.tp"), whole=whole(b300))

    def rederive(path: str, side: str, f: float) -> float | None:
        return wall(perturbed(b300, path, f), "parallel.tp").value

    assert check_against_finite_differences(d, rederive) >= MIN_TESTED


def test_a_wall_with_a_growing_addend_held() -> None:
    """PCIe: the tree all-reduce's log N latency is held at TP-8 (a product over a sum in the
    symbolic step time, multiplied out so that only the log is held, as in the numbers)."""
    rtx = build_model("k26-rtxpro6000-tp8-ddtree")
    d = attach(wall(rtx, "parallel.tp"), whole=whole(rtx))
    assert d.details["frozen"], d.definition

    def rederive(path: str, side: str, f: float) -> float | None:
        return wall(perturbed(rtx, path, f), "parallel.tp").value

    assert check_against_finite_differences(d, rederive) >= MIN_TESTED


def test_an_interior_optimum() -> None:
    busy = build_model("k26-b300-tp8-ddtree", ["workload.concurrency=64"])
    d = attach(optimum(busy, "parallel.tp"), whole=whole(busy))
    assert d.details["where"] == "stationary"

    def rederive(path: str, side: str, f: float) -> float | None:
        return optimum(perturbed(busy, path, f), "parallel.tp").value

    assert check_against_finite_differences(d, rederive) >= MIN_TESTED


def test_a_regime_change() -> None:
    b300 = build_model("k26-b300-tp8-ddtree")
    first = attach(regime(b300, "parallel.tp")[0], whole=whole(b300))

    def rederive(path: str, side: str, f: float) -> float | None:
        same = [r for r in regime(perturbed(b300, path, f), "parallel.tp")
                if r.details["from"] == first.details["from"]
                and r.details["to"] == first.details["to"]]  # fmt: skip
        return same[0].value if same else None

    assert check_against_finite_differences(first, rederive) >= 2


def test_a_kink_moves_with_the_domain_one_for_one() -> None:
    b300 = build_model("k26-b300-tp8-ddtree")
    d = attach(optimum(b300, "parallel.tp"))
    assert d.details["where"] == "kink"  # TP leaves the NVLink domain
    by = {s.parameter: s.elasticity for s in d.sensitivities}
    assert by == {"cluster.scale_up.domain_size": pytest.approx(1.0)}


REPORT = '''
title = "Sensitivities in a report"
[scenarios.b]
scenario = "k26-b300-tp8-ddtree"
[scenarios.ep]
scenario = "k26-gb300nvl72-ep72"
[scenarios.dp]
scenario = "k26-hgxb300-dp9-tp8"

[[block]]
kind = "derivation"
id = "w"
derive = "wall"
scenario = "b"
key = "parallel.tp"
sensitivities = 3

[[block]]
kind = "derivation"
id = "x"
derive = "crossover"
scenario = "ep"
against = "dp"
key = "workload.concurrency"

[[block]]
kind = "prose"
text = """bandwidth moves the wall by {w.sensitivity.hardware.hbm_bandwidth:+.6f} and the \
crossover by {x.sensitivity.dp.hardware.hbm_bandwidth:+.6f} (HGX) and \
{x.sensitivity.hardware.hbm_bandwidth:+.6f} (both)."""
'''


def test_a_report_shows_each_roots_sensitivities(tmp_path: Path) -> None:
    """A derivation block: the largest sensitivities beside the root (whole-number counts
    left to the CSV), all of them in ID.sensitivities.csv with the report's aliases as sides,
    each as a placeholder; the wall's bandwidth elasticity is its finite difference."""
    from stepwall.cli import main

    spec = tmp_path / "r.toml"
    spec.write_text(REPORT)
    assert main(["report", str(spec), "-o", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "REPORT.md").read_text()
    rows = {}
    for name in ("w", "x"):
        with (tmp_path / "out" / f"{name}.sensitivities.csv").open() as f:
            rows[name] = {(r["parameter"], r["side"]): r for r in csv.DictReader(f)}
    m = re.search(r"by ([-+][\d.]+) and the crossover by ([-+][\d.]+) \(HGX\) and "
                  r"([-+][\d.]+) \(both\)", md)  # fmt: skip
    assert m, md
    wall_bw, dp_bw, both_bw = (float(g) for g in m.groups())
    shown = 1e-6  # the prose prints six decimals
    w_bw = float(rows["w"][("hardware.hbm_bandwidth", "")]["elasticity"])
    x_bw = {side: float(rows["x"][("hardware.hbm_bandwidth", side)]["elasticity"])
            for side in ("ep", "dp", "both")}  # fmt: skip
    assert wall_bw == pytest.approx(w_bw, abs=shown)
    assert dp_bw == pytest.approx(x_bw["dp"], abs=shown)
    assert both_bw == pytest.approx(x_bw["both"], abs=shown)
    # each side printed to 10 significant digits: half a unit of ~1 each, and they cancel
    assert x_bw["both"] == pytest.approx(x_bw["dp"] + x_bw["ep"], abs=1.1e-9)
    # the wall's table: the three largest of the parameters that take any value, in order
    table = re.findall(r"^\| `([\w.]+)` \| ([-+][\d.]+) \|$", md, re.M)
    ranked = sorted(((k[0], float(r["elasticity"])) for k, r in rows["w"].items()
                     if r["whole"] == "no" and float(r["elasticity"])),
                    key=lambda kv: -abs(kv[1]))  # fmt: skip
    assert [p for p, _ in table[:3]] == [p for p, _ in ranked[:3]]
    b300 = build_model("k26-b300-tp8-ddtree")
    up, dn = (wall(perturbed(b300, "hardware.hbm_bandwidth", f), "parallel.tp").value
              for f in (1 + STEP, 1 - STEP))  # fmt: skip
    assert up is not None and dn is not None
    fd = (math.log(up) - math.log(dn)) / (math.log(1 + STEP) - math.log(1 - STEP))
    assert wall_bw == pytest.approx(fd, rel=0.01)
