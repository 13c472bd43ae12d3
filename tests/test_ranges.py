"""Ranges (docs/ranges.md): parsing and unit checks, one-line errors, bounds that hold every
densely sampled point of random boxes and are attained, the tornado's ranking against swings
computed here, and derivations over a box. No expected value comes from the code under test:
bounds are checked against the model evaluated at points this file picks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepwall.analyses.ranges import bounds, inputs
from stepwall.cli import main
from stepwall.core.errors import UnitError
from stepwall.model.compose import StepModel, build_model
from stepwall.spec.grammar import parse_range

# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(("text", "low", "nominal", "high", "dim"), [
    ("7.2..8 TB/s", 7.2e12, 7.6e12, 8e12, "B/s"),
    ("7.2..8 (7.6) TB/s", 7.2e12, 7.6e12, 8e12, "B/s"),
    ("7.2..8 TB/s (7.3 TB/s)", 7.2e12, 7.3e12, 8e12, "B/s"),
    ("7200 GB/s..8 TB/s", 7.2e12, 7.6e12, 8e12, "B/s"),
    ("0.70..0.92 (0.70)", 0.70, 0.70, 0.92, "dimensionless"),
    ("4..6 us", 4e-6, 5e-6, 6e-6, "s"),
    ("1..1 GB", 1e9, 1e9, 1e9, "B"),
    ("400..800 Gb/s", 50e9, 75e9, 100e9, "B/s"),
])  # fmt: skip
def test_range_syntax(text: str, low: float, nominal: float, high: float, dim: str) -> None:
    lo, nom, hi, d = parse_range(text)
    assert (lo, nom, hi) == pytest.approx((low, nominal, high), rel=1e-12)
    assert str(d) == dim


@pytest.mark.parametrize(("text", "says"), [
    ("8..7.2 TB/s", "low end above its high end"),
    ("7.2 TB/s..8 ms", "mixed units"),
    ("7.2..8 (1 ms) TB/s", "mixed units"),
    ("nan..8 TB/s", "not a finite number"),
    ("1..inf", "not a finite number"),
    ("1..2 (3)", "nominal value"),
    ("1..2..3", "cannot read range"),
    ("1..2 (1) (2)", "at most one"),
    ("..2 TB/s", "cannot read range"),
    ("1..2 parsecs", "unknown unit"),
])  # fmt: skip
def test_bad_range_text(text: str, says: str) -> None:
    with pytest.raises(UnitError, match=says):
        parse_range(text)


# ---------------------------------------------------------------- one-line errors


def _error(capsys: Any, *argv: str) -> str:
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("body", "key", "says"), [
    ('[hardware]\nhbm_bandwidth = "8..7.2 TB/s"\n', "hardware.hbm_bandwidth", "low end above"),
    ('[hardware]\nhbm_bandwidth = "7.2 TB/s..8 GB"\n', "hardware.hbm_bandwidth", "mixed units"),
    ('[hardware]\nhbm_bandwidth = "7.2..8 ms"\n', "hardware.hbm_bandwidth", "s quantity, not B/s"),
    ('[hardware]\nhbm_bandwidth = "nan..8 TB/s"\n', "hardware.hbm_bandwidth", "not a finite"),
    ('[engine]\nmemory_efficiency = "0.5..1.5"\n', "engine.memory_efficiency", "out of range"),
    ('[parallel]\ntp = "4..8"\n', "parallel.tp", "takes whole numbers"),
])  # fmt: skip
def test_a_bad_range_in_a_file_is_one_line_naming_file_and_key(
    tmp_path: Path, capsys: Any, body: str, key: str, says: str
) -> None:
    spec = tmp_path / "ranged.toml"
    spec.write_text(f'from = "k26-b300-tp8-ddtree"\n{body}', encoding="utf-8")
    err = _error(capsys, "eval", str(spec))
    assert f"ranged.toml:{key}:" in err and says in err, err


def test_a_bad_range_on_the_command_line_names_set_and_key(capsys: Any) -> None:
    err = _error(capsys, "eval", "dsv3-h200-tp8", "--set", "hardware.hbm_bandwidth=4.8..4 TB/s")
    assert err.startswith("stepwall: error: --set:hardware.hbm_bandwidth: ")
    assert "low end above its high end" in err


def test_a_range_on_a_key_that_shapes_the_model_is_refused(monkeypatch: Any) -> None:
    """A plugin that reads a value while building makes the key structural; a range is kept
    only where the model built at each end has the same expressions (`same_shape`)."""
    from stepwall.analyses import ranges
    from stepwall.core.errors import SpecError

    base = build_model("dsv3-h200-tp8")
    # no shared expert: the shared-expert term is gone, whatever the routed ones do
    assert not ranges.same_shape(base, "model.n_shared_experts", [0.0])
    assert ranges.same_shape(base, "hardware.hbm_efficiency", [0.6, 0.9])  # read, not shaped
    model = build_model("dsv3-h200-tp8", ["hardware.hbm_efficiency=0.6..0.9 (0.8)"])
    assert "hardware.hbm_efficiency" in model.structural_keys
    assert [r.path for r in inputs(model)] == ["hardware.hbm_efficiency"]
    monkeypatch.setattr(ranges, "same_shape", lambda *a, **k: False)
    with pytest.raises(SpecError, match="cannot take a range") as e:
        inputs(model)
    assert (e.value.where, e.value.key) == ("--set", "hardware.hbm_efficiency")


# ---------------------------------------------------------------- eval output


def test_eval_without_ranges_has_no_range_fields(capsys: Any) -> None:
    assert main(["eval", "dsv3-h200-tp8", "--json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not {"ranges", "range_methods", "range_inputs"} & set(doc)
    assert all("range" not in t for t in doc["terms"])
    assert main(["eval", "dsv3-h200-tp8", "--no-cache"]) == 0
    assert "ranges (" not in capsys.readouterr().out


def test_eval_json_keeps_todays_fields_and_adds_ranges(capsys: Any) -> None:
    assert main(["eval", "dsv3-h200-tp8", "--json", "--no-cache"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["eval", "dsv3-h200-tp8", "--json", "--set",
                 "hardware.hbm_bandwidth=4..4.8 TB/s (4.8 TB/s)"]) == 0  # fmt: skip
    ranged = json.loads(capsys.readouterr().out)
    terms = [{a: b for a, b in t.items() if a != "range"} for t in ranged["terms"]]
    assert terms == plain["terms"]
    for k, v in plain.items():  # today's fields, at the nominal point (here the catalog's)
        if k not in ("overrides", "parameters", "terms"):
            assert ranged[k] == v, k
    lo, hi = ranged["ranges"]["tokens_per_s"]
    assert lo < plain["tokens_per_s"] <= hi * (1 + 1e-12)
    assert ranged["range_methods"]["tokens_per_s"].startswith("exact")
    assert ranged["range_inputs"] == [{"path": "hardware.hbm_bandwidth", "low": 4e12,
                                       "high": 4.8e12, "nominal": 4.8e12, "unit": "B/s",
                                       "file": "--set"}]  # fmt: skip
    moe = next(t for t in ranged["terms"] if t["name"] == "moe.routed_experts")
    # memory-bound: time ∝ 1/bandwidth, so the low end of bandwidth gives ×1.2 the time
    assert moe["range"][1] == pytest.approx(moe["seconds"] * 4.8 / 4.0, rel=1e-9)


def test_eval_text_lists_each_metric_and_term_as_nominal_and_interval(capsys: Any) -> None:
    assert main(["eval", "k26-b300-tp8-ddtree-ranged"]) == 0
    out = capsys.readouterr().out
    assert "ranges (3 inputs; nominal and [low, high] over their box)" in out
    assert "specs/scenarios/k26-b300-tp8-ddtree-ranged.toml" in out
    table = out.split("ranges (")[1]
    speed = next(line for line in table.splitlines() if line.startswith("tokens/s per user  "))
    assert "[" in speed and speed.rstrip().endswith("exact")
    assert "spec.draft" in table


# ---------------------------------------------------------------- bounds over random boxes

CASES = [("k26-b300-tp8-ddtree", seed) for seed in (1, 2, 3)] + [
    ("dsv3-h200-tp8", seed) for seed in (1, 2, 3)
]


def _box(base: StepModel, rng: np.random.Generator) -> list[str]:
    """--set ranges on 3 random continuous parameters the step time depends on: low in
    [0.5, 1]×, high in [1, 1.5]× the catalog value, nominal the catalog value."""
    sc = base.scenario
    free = base.metrics["step_time_s"].free_symbols
    candidates = []
    for sym in sorted(free, key=lambda s: s.name):
        f = sc.field(sym.name)
        v = float(base.values.get(sym, 0.0))
        if f is None or f.metadata.get("integer") or v <= 0 or sym.name in base.structural_keys:
            continue
        candidates.append((sym, f, v))
    picks = rng.choice(len(candidates), size=3, replace=False)
    sets = []
    for i in sorted(picks):
        sym, f, v = candidates[i]
        lo = max(v * rng.uniform(0.5, 1.0), f.metadata["minimum"])
        hi = v * rng.uniform(1.0, 1.5)
        if f.metadata["maximum"] is not None:
            hi = min(hi, f.metadata["maximum"])
        unit = "" if sym.dim.dimensionless else f" {sym.dim}"
        sets.append(f"{sym.name}={lo!r}..{hi!r} ({v!r}){unit}")
    return sets


@pytest.mark.parametrize(("scenario", "seed"), CASES)
def test_every_sampled_point_lies_inside_and_the_ends_are_attained(
    scenario: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    sets = _box(build_model(scenario), rng)
    model = build_model(scenario, sets)
    ranged = inputs(model)
    assert len(ranged) == 3
    found = bounds(model)
    # dense sampling of the box: random points and every corner, evaluated here
    n = 4000
    pts = {r.path: rng.uniform(r.low, r.high, n) for r in ranged}
    for j, r in enumerate(ranged):
        corner = np.array([(r.low, r.high)[(k >> j) & 1] for k in range(8)])
        pts[r.path] = np.concatenate([pts[r.path], corner])
    ev = model.evaluate(pts)
    for name, b in found.items():
        raw = ev["terms"][name[5:]] if name.startswith("term.") else ev[name]
        ys = np.broadcast_to(np.asarray(raw, dtype=float), (n + 8,))
        tol = 1e-9 * max(abs(b.low), abs(b.high), 1e-30)
        assert b.low <= b.high
        assert ys.min() >= b.low - tol, (name, b)
        assert ys.max() <= b.high + tol, (name, b)
        assert b.low - tol <= b.nominal <= b.high + tol
        # tight: each end is the model's value at a point of the box (evaluated here)
        for end, point in ((b.low, b.at_low), (b.high, b.at_high)):
            for r in ranged:
                assert r.low <= point[r.path] <= r.high
            at = model.evaluate({r.path: point[r.path] for r in ranged})
            v = float(at["terms"][name[5:]] if name.startswith("term.") else at[name])
            assert v == pytest.approx(end, rel=1e-3, abs=1e-30), (name, b)
        if b.method == "exact":  # monotone: the sampled corners reach both ends
            assert ys.min() == pytest.approx(b.low, rel=1e-3, abs=1e-30), name
            assert ys.max() == pytest.approx(b.high, rel=1e-3, abs=1e-30), name
    assert found["step_time_s"].method == "exact"


def test_a_non_monotone_output_is_split_where_its_derivative_changes_sign() -> None:
    """pd_prefill_gpus = aggregate·ISL/OSL / prefill rate: both rise with memory efficiency,
    so the ratio need not be monotone in it; the bound is found along it and checked here
    against a grid of 20001 points."""
    model = build_model("k26-b300-tp8-ddtree-ranged")
    b = bounds(model)["pd_prefill_gpus"]
    assert b.method in ("split", "sampled", "exact")
    r = {x.path: x for x in inputs(model)}
    eff = r["engine.memory_efficiency"]
    base = {p: b.at_low[p] for p in r if p != eff.path}
    xs = np.linspace(eff.low, eff.high, 20001)
    ys = np.asarray(model.evaluate({**base, eff.path: xs})["pd_prefill_gpus"], dtype=float)
    assert ys.min() >= b.low * (1 - 1e-9)
    assert ys.min() == pytest.approx(b.low, rel=1e-6)


# ---------------------------------------------------------------- tornado


def test_tornado_ranks_by_swings_computed_independently(capsys: Any) -> None:
    sets = ["hardware.hbm_bandwidth=4..5 TB/s (4.8 TB/s)",
            "engine.per_step=0.1..2 ms (0.5 ms)",
            "cluster.scale_up.bus_bandwidth=200..500 GB/s (400 GB/s)"]  # fmt: skip
    assert main(["derive", "dsv3-h200-tp8", "tornado", "--metric", "tokens_per_s", "--json",
                 *(a for s in sets for a in ("--set", s))]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    results = doc["results"]
    model = build_model("dsv3-h200-tp8", sets)
    swings = {}
    for r in inputs(model):
        xs = np.linspace(r.low, r.high, 4001)
        ys = np.asarray(model.evaluate({r.path: xs})["tokens_per_s"], dtype=float)
        swings[r.path] = float(ys.max() - ys.min())
    ranked = sorted(swings, key=lambda k: -swings[k])
    assert [d["key"] for d in results] == ranked
    for d in results:
        assert d["value"] == pytest.approx(swings[d["key"]], rel=1e-3)
        assert d["value"] >= swings[d["key"]] * (1 - 1e-12)  # exact, never below a sample
    top = results[0]["details"]
    assert top["elasticity"] != 0 and top["first_order"] > 0


def test_tornado_needs_ranges_or_a_spread(capsys: Any) -> None:
    err = _error(capsys, "derive", "dsv3-h200-tp8", "tornado")
    assert "no ranged values" in err and "--spread" in err
    assert main(["derive", "dsv3-h200-tp8", "tornado", "--spread", "0.1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tornado of step_time_s [dsv3-h200-tp8]")
    assert "hardware.hbm_bandwidth" in out


# ---------------------------------------------------------------- derivations over a box


def test_a_wall_over_ranges_is_the_interval_of_its_corners(capsys: Any) -> None:
    ranged = "engine.memory_efficiency=0.6..0.9 (0.7)"
    assert main(["derive", "k26-b300-tp8-ddtree", "wall", "parallel.tp", "--json",
                 "--set", ranged]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    walls = []
    for v in ("0.6", "0.9"):  # each corner built as its own scenario
        assert main(["derive", "k26-b300-tp8-ddtree", "wall", "parallel.tp", "--json",
                     "--set", f"engine.memory_efficiency={v}"]) == 0  # fmt: skip
        walls.append(json.loads(capsys.readouterr().out)["value"])
    lo, hi = doc["details"]["range"]
    assert (lo, hi) == pytest.approx((min(walls), max(walls)), rel=1e-9)
    assert lo < doc["value"] < hi
    assert doc["details"]["range_corners"] == 2


def test_a_crossover_over_ranges_spans_the_corners_of_both_sides(capsys: Any) -> None:
    """--set applies to both scenarios of a crossover: each side's range is its own input,
    so the box has 2 × 2 corners, and the nominal crossing lies inside the interval."""
    argv = ["derive", "k26-gb300nvl72-ep8-plateau", "crossover", "workload.concurrency",
            "--against", "k26-b300-tp8-ddtree-native", "--json",
            "--set", "hardware.hbm_bandwidth=7..8 TB/s"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    lo, hi = doc["details"]["range"]
    assert doc["details"]["range_corners"] == 4
    assert lo <= doc["value"] <= hi and lo < hi
    assert "k26-b300-tp8-ddtree-native:hardware.hbm_bandwidth" in doc["details"]["range_inputs"]


# ---------------------------------------------------------------- the shipped report


def test_the_shipped_report_states_the_seeds_speeds_beside_ranges_from_the_corners() -> None:
    """Section 8 of docs/reports/k26-cluster-scaling: the seed's hand-derived ranges next to
    the speeds the ranged scenario spans, which are checked here at the box's 8 corners."""
    import itertools
    import re

    md = Path(__file__).resolve().parents[1] / "docs/reports/k26-cluster-scaling/REPORT.md"
    text = md.read_text(encoding="utf-8")
    for label, seed, extra in (("current engine", "570–765", []),
                               ("native engine", "815–1090", ["engine.native=0.6"])):  # fmt: skip
        row = re.search(rf"^\| {label}[^|]* \| {seed} \| (\d+)–(\d+) \(nominal (\d+)\) \|$",
                        text, re.M)  # fmt: skip
        assert row, label
        model = build_model("k26-b300-tp8-ddtree-ranged", ["parallel.uneven=true", *extra])
        box = model.scenario.ranges
        speeds = [
            float(model.evaluate(dict(zip(box, corner, strict=True)))["tokens_per_s_per_user"])
            for corner in itertools.product(*box.values())
        ]
        nominal = float(model.evaluate()["tokens_per_s_per_user"])
        assert [int(g) for g in row.groups()] == [round(min(speeds)), round(max(speeds)),
                                                  round(nominal)]  # fmt: skip
        # the prose says the bounds are exact (monotone): so they are
        assert bounds(model)["tokens_per_s_per_user"].method == "exact"


def test_a_box_with_an_impossible_corner_is_refused(capsys) -> None:
    """The nominal point fits, the box's low end of memory does not: no range is printed
    over impossible configurations (a one-line error), unless --allow-infeasible."""
    sets = ["--set", "hardware.memory_capacity=120..141 (141) GB"]
    assert main(["eval", "dsv3-h200-tp8", *sets]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "memory_fits" in err and "120 GB" in err
    assert main(["eval", "dsv3-h200-tp8", *sets, "--allow-infeasible"]) == 0
    assert "ranges" in capsys.readouterr().out
