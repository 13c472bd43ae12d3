"""Derivations (issue 4): each test derives from the specs and checks the BRIEF's figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stepwall.analyses.crossover import crossover
from stepwall.analyses.elasticity import elasticity
from stepwall.analyses.optimum import optimum
from stepwall.analyses.regime import regime
from stepwall.analyses.wall import wall
from stepwall.cli import main
from stepwall.core.errors import SpecError
from stepwall.model.compose import build_model
from stepwall.plugins.moe_plateau import plateau


@pytest.fixture(scope="module")
def b300():
    return build_model("k26-b300-tp8-ddtree")


# --- the TP-8 wall (BRIEF S17)


def test_tp_wall_b300_in_brief_range_with_shape_a_over_eps_b(b300):
    d = wall(b300, "parallel.tp", eps=0.15)
    assert 6 <= d.value <= 10  # S17: derived N in [6, 10]
    assert d.method == "symbolic"
    assert "epsilon" in d.closed_form and d.details["shape"].startswith("A/(epsilon*B)")
    # the shape A/(eps*B): halving the tolerance doubles the wall
    d2 = wall(b300, "parallel.tp", eps=0.075)
    assert d2.value == pytest.approx(2 * d.value, rel=1e-9)
    # B is t(inf): the step with all splittable work gone; the seed puts ~85% of the step there
    step = float(b300.evaluate()["step_time_s"])
    assert 0.78 <= d.details["B"] / step <= 0.9
    # the feasible value is the first whole TP >= the wall at which every constraint holds
    # (64 heads and 2048 expert columns split evenly): no degree in between qualifies
    assert "ceiling" in d.definition
    feas = d.feasible_value
    tp = b300.parameter("parallel.tp")
    ok = b300.evaluate({tp: np.arange(1.0, 73.0)})["feasible"]
    assert bool(ok[feas - 1]) and not ok[math.ceil(d.value) - 1 : feas - 1].any()


def test_tp_wall_symbolic_keeps_parameters(b300):
    d = wall(b300, "parallel.tp", symbolic=True)
    assert "hardware.hbm_bandwidth" in d.closed_form and "epsilon" in d.closed_form
    assert "parallel.tp" not in d.closed_form
    assert 6 <= d.value <= 10


def test_wall_moves_with_hardware_rtx():
    d = wall(build_model("k26-rtxpro6000-tp8-ddtree"), "parallel.tp")
    assert d.value > 16  # well beyond 8: slow GDDR7 makes the MoE term dominate (BRIEF §2.6)
    # the PCIe box holds 8 GPUs: no TP near the wall fits it, and the note says which bound
    assert d.feasible_value is None and "layout_fits_cluster" in d.note
    assert d.details["frozen"]  # growing ring/tree latency is held, and the definition says so
    assert "held at their value" in d.definition


# --- the EP plateau (BRIEF §5: 90% at T ≈ 109)


def test_plateau_autoregressive_and_ddtree_ratio_is_verify_width():
    ar = plateau(build_model("k26-b300-tp1-moe"), 0.9)
    dd_model = build_model("k26-b300-tp8-ddtree", ["decoding.budget=32"])
    dd = plateau(dd_model, 0.9)
    assert ar.value == pytest.approx(110, rel=0.03)
    assert dd.value == pytest.approx(3.3, rel=0.03)
    assert ar.method == dd.method == "symbolic"
    budget = dd_model.parameter("decoding.budget")
    assert dd.details["ratio_autoregressive_over_this"] == str(budget + 1)
    assert ar.value / dd.value == pytest.approx(33, rel=1e-9)
    assert dd.feasible_value == 4 and ar.feasible_value == 110


# --- crossover: EP-72 on NVL72 vs nine DP TP-8 replicas on HGX + IB


def test_crossover_ep72_nvl72_vs_dp9_hgx():
    ep = build_model("k26-gb300nvl72-ep72")
    dp = build_model("k26-hgxb300-dp9-tp8")
    d = crossover(ep, dp, "workload.concurrency", "tokens_per_s_per_gpu")
    assert d.value is not None, d.note  # EP-72 overtakes nine TP-8 replicas inside the range
    lo, hi = d.details["range"]
    assert lo < d.value < hi
    ep_name, dp_name = ep.scenario.name, dp.scenario.name
    # EP-72 wins at high concurrency (all experts busy), DP TP-8 at one user
    assert d.details["at_hi"][ep_name] > d.details["at_hi"][dp_name]
    assert d.details["at_lo"][ep_name] < d.details["at_lo"][dp_name]
    # in closed form (issue 15): exact (Lambert W) or in a named regime within 5%
    assert d.method in ("symbolic", "asymptotic"), d.note
    assert d.method == "symbolic" or d.regime["error"] <= 0.05

    def per_gpu(m, c):
        return float(m.evaluate({"workload.concurrency": c})["tokens_per_s_per_gpu"])

    below, above = 0.8 * d.value, 1.25 * d.value
    assert per_gpu(ep, below) < per_gpu(dp, below / 9)
    assert per_gpu(ep, above) > per_gpu(dp, above / 9)


# --- optimum


def test_optimum_tp_across_infiniband_is_finite(b300):
    d = optimum(b300, "parallel.tp")
    _, hi = d.details["range"]
    assert hi == 72  # nine HGX nodes
    assert d.value < hi and d.details["where"] in ("kink", "stationary")
    busy = build_model("k26-b300-tp8-ddtree", ["workload.concurrency=64"])
    d64 = optimum(busy, "parallel.tp")
    assert 8 < d64.value < hi and d64.details["where"] == "stationary"


def test_optimum_tp_nvl72_none_below_72():
    d = optimum(build_model("k26-gb300nvl72-tp72-ddtree"), "parallel.tp")
    assert d.value == 72 and d.details["monotone"]
    assert "monotone: best at the bound" in d.note


def test_optimum_symbolic_kink_is_domain_size(b300):
    d = optimum(b300, "parallel.tp", symbolic=True)
    assert d.details["where"] == "kink"  # TP leaves the NVLink domain: IB latency jumps in
    assert d.closed_form == "cluster.scale_up.domain_size"


# --- elasticity (BRIEF §2.2: ~85% fixed overhead, ~15% MoE streaming)


def test_elasticities_levers(b300):
    es = {d.key: d for d in elasticity(b300)}
    fixed = sum(d.value for d in es.values() if d.details["is_time"])
    # seed: 0.85; our attention-weight and KV reads are memory traffic, not fixed overhead,
    # which moves ~0.04 from the fixed side to HBM bandwidth: 0.81 here
    assert 0.78 <= fixed <= 0.90
    for p in ("engine.per_step", "engine.per_layer", "decoding.draft_time"):
        assert es[p].value > 0
    assert -0.22 <= es["hardware.hbm_bandwidth"].value <= -0.13  # seed −0.15; ours ≈ −0.19
    ordered = [round(abs(d.value), 9) for d in elasticity(b300)]
    assert ordered == sorted(ordered, reverse=True)
    tok = {d.key: d for d in elasticity(b300, "tokens_per_s")}
    assert tok["decoding.accepted_tokens"].value == pytest.approx(1.0, abs=1e-9)


def test_elasticity_at_override(b300):
    es = {d.key: d for d in elasticity(b300, at={"parallel.tp": 72})}
    base = {d.key: d for d in elasticity(b300)}
    assert abs(es["hardware.hbm_bandwidth"].value) < abs(base["hardware.hbm_bandwidth"].value)


# --- regime


def test_regime_moe_dominates_at_tp1_then_overhead(b300):
    rs = regime(b300, "parallel.tp")
    first = rs[0]
    assert first.details["from"] == "moe.routed_experts"
    assert first.value < 8  # by TP-8 the drafter/overhead term is the largest
    assert first.details["to"].startswith(("spec.", "engine."))


# --- errors, CLI, time limits


def test_unknown_key_is_spec_error(b300):
    with pytest.raises(SpecError):
        wall(b300, "parallel.tpp")


def test_cli_json_is_one_document(capsys):
    rc = main(["derive", "k26-b300-tp8-ddtree", "wall", "parallel.tp", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)  # one document, not JSON lines
    for k in ("kind", "key", "value", "feasible_value", "closed_form", "latex", "definition"):
        assert k in doc
    assert doc["method"] in ("symbolic", "numeric") and 6 <= doc["value"] <= 10
    rc = main(["derive", "k26-b300-tp8-ddtree", "elasticity", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["kind"] == "elasticity" and len(doc["results"]) > 10
    assert all(o["kind"] == "elasticity" for o in doc["results"])
    rc = main(["derive", "k26-b300-tp8-ddtree", "wall", "nope.key"])
    assert rc == 2 and capsys.readouterr().err.count("\n") == 1


def test_cli_text_and_plateau(capsys):
    rc = main(["derive", "k26-b300-tp1-moe", "plateau", "--fraction", "0.9"])
    out = capsys.readouterr().out
    assert rc == 0 and "closed form" in out and "method" in out
