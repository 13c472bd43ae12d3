"""stepwall validate's frontier rows (best METRIC at a target through search), ranking groups,
prediction bands (calibration intervals and stated ranges) with their coverage, and
two-batch overlap's efficiency (laws.partial_overlap)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import attrs
import numpy as np
import pytest
import sympy as sp

from stepwall.apps import bands, validate
from stepwall.apps.report.plots import plot_frontier_band
from stepwall.cli import main
from stepwall.core.errors import SpecError
from stepwall.core.symbols import parameter
from stepwall.core.terms import Term
from stepwall.core.units import DIMENSIONLESS, TIME
from stepwall.model.compose import build_model, compose_step_time

SCENARIO = "llama8b-h100-serving"  # one H100, Llama-3.1-8B FP8: a search of a few points
SPACE = ["--gpus", "1", "--isl", "1000", "--osl", "1000", "--batch", "1..256:x2"]
BATCHES = [2**k for k in range(9)]

FRONTIER = """
[[row]]
id = "{id}"
class = "frontier"
scenario = "{scenario}"
metric = "tokens_per_s_per_gpu"
measured = "{measured}"
at = "{at}"
search = {search}
{extra}
source = "a test"
url = "https://example.org"
"""


def _row(id: str, at: str, measured: str = "5000 tokens/s", scenario: str = SCENARIO,
         search: list[str] | None = None, extra: str = "") -> str:  # fmt: skip
    return FRONTIER.format(id=id, at=at, measured=measured, scenario=scenario, extra=extra,
                           search=json.dumps(SPACE if search is None else search))  # fmt: skip


def _table(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.toml"
    p.write_text(text)
    return p


def _brute_best(minimum: float, sets: tuple[str, ...] = ()) -> float:
    """The best tokens/s per GPU with ≥ ``minimum`` tokens/s per user over SPACE, by
    evaluating the scenario itself at every batch (not through search)."""
    model = build_model(SCENARIO, sets)
    ev = model.evaluate({model.provides["users"]: np.array(BATCHES, dtype=float)})
    ok = np.asarray(ev["feasible"], dtype=bool) & (
        np.asarray(ev["tokens_per_s_per_user"]) >= minimum
    )
    return float(np.max(np.asarray(ev["tokens_per_s_per_gpu"])[ok]))


def _brute_reach() -> float:
    """The most tokens/s per user any feasible batch of SPACE gives, by evaluating the
    scenario itself at every batch."""
    model = build_model(SCENARIO, ())
    ev = model.evaluate({model.provides["users"]: np.array(BATCHES, dtype=float)})
    ok = np.asarray(ev["feasible"], dtype=bool)
    return float(np.max(np.asarray(ev["tokens_per_s_per_user"])[ok]))


def test_frontier_row_is_the_best_configuration_at_its_target(tmp_path):
    """A frontier row predicts the best metric at its target over its space: the same as
    evaluating the scenario at every batch of the space and keeping the best that meets it."""
    rows = validate.load_rows([_table(tmp_path, _row("a", "tokens_per_s_per_user>=50"))])
    (r,) = validate.predict(rows, intervals={})
    assert r.infeasible == ""
    assert r.predicted == pytest.approx(_brute_best(50.0), rel=1e-9)
    assert "tp1" in r.chosen and "C=" in r.chosen


def test_rows_of_one_space_share_one_search(tmp_path, monkeypatch):
    """Rows with the same scenario, space and overrides differ only in the target: one search
    answers them all; an unreachable target is a reported miss, not a crash."""
    calls = []
    real = validate.run_search
    monkeypatch.setattr(validate, "run_search", lambda plan: calls.append(plan) or real(plan))
    targets = {"lo": 20, "hi": 60, "never": 100_000}
    text = "".join(_row(i, f"tokens_per_s_per_user>={v}") for i, v in targets.items())
    results = validate.predict(validate.load_rows([_table(tmp_path, text)]), intervals={})
    assert len(calls) == 1
    lo, hi, never = results
    assert lo.predicted == pytest.approx(_brute_best(20.0), rel=1e-9)
    assert hi.predicted == pytest.approx(_brute_best(60.0), rel=1e-9)
    assert lo.predicted >= hi.predicted  # a looser target admits more configurations
    assert never.infeasible.startswith("no configuration of the space meets")
    reach = _brute_reach()
    assert f"the nearest gives tokens_per_s_per_user {reach:.4g}, " in never.infeasible
    assert never.infeasible.endswith(f"{1 - reach / 100_000:.1%} short")
    assert validate.summary(results)["classes"]["frontier"]["infeasible"] == 1


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        (_row("a", "").replace('at = ""\n', ""), "row[0].at", "missing"),
        (_row("a", "tokens_per_s_per_user>>5"), "row[0].at", "cannot read quantity"),
        (_row("a", "x>=1", search=["--gpus", "1"]), "row[0].at", "unknown metric"),
        (_row("a", "tokens_per_s_per_user>=5", search=["--bogus", "1"]), "row[0].search",
         "not an option of the space"),
        (_row("a", "tokens_per_s_per_user>=5", search=["--gpus"]), "row[0].search", "no value"),
        (_row("a", "tokens_per_s_per_user>=5", search=["--gpus", "0"]), "row[0].search",
         "--gpus"),
        (_row("a", "tokens_per_s_per_user>=5", search=["--workload", "x"]), "row[0].search",
         "not searched"),
        (_row("a", "tokens_per_s_per_user>=5", extra="fill_memory = true"),
         "row[0].fill_memory", "searched"),
        (_row("a", "tokens_per_s_per_user>=5").replace('"frontier"', '"dense"'), "row[0].at",
         "only frontier and disagg rows"),
        (_row("a", "tokens_per_s_per_user>=5", extra='ranking = "g"')
         + _row("b", "tokens_per_s_per_user>=9", extra='ranking = "g"'), "row[1].at",
         "ranking group"),
    ],
)  # fmt: skip
def test_bad_frontier_rows_are_one_line_errors(tmp_path, capsys, text, key, problem):
    table = _table(tmp_path, text)
    assert main(["validate", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"stepwall: error: {table}:{key}:"), err
    assert problem in err, err


def test_a_search_error_names_the_row(tmp_path, capsys):
    """An error the search finds (a --vary of an unknown key) is reported at the row."""
    bad = _row("a", "tokens_per_s_per_user>=5", search=[*SPACE, "--vary", "hardware.nope=1,2"])
    table = _table(tmp_path, bad)
    assert main(["validate", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{table}:row[0]" in err, err


def _result(id: str, measured: float, predicted: float, band: tuple[float, float] | None,
            infeasible: str = "", ranking: str = "") -> validate.Result:  # fmt: skip
    spec = validate.RowSpec(id=id, row_class="frontier", scenario=SCENARIO,
                            metric="tokens_per_s_per_gpu", measured=f"{measured} tokens/s",
                            source="s", url="u", at="tokens_per_s_per_user>=5",
                            ranking=ranking)  # fmt: skip
    row = validate.Row(spec, Path("t.toml"), 0, Path("x.toml"), measured)
    return validate.Result(row, predicted, infeasible, band=band)


def test_coverage_counts_measurements_inside_their_bands():
    results = [
        _result("in", 100, 110, (90, 120)),
        _result("edge", 120, 110, (90, 120)),  # an end counts as inside
        _result("out", 200, 110, (90, 120)),
        _result("none", 100, 110, None),  # no ranged input
        _result("miss", 100, float("nan"), (90, 120), infeasible="no configuration"),
    ]
    c = validate.coverage(results)
    assert (c["banded"], c["inside"], c["unbanded"]) == (3, 2, 1)
    assert c["fraction"] == pytest.approx(2 / 3)
    assert "band coverage: 2 of 3 measurements inside their band (67%)" in validate.text(results)


def test_ranking_compares_measured_and_predicted_orders():
    match = [_result("b200", 300, 310, None, ranking="g"), _result("h200", 100, 90, None,
                                                                   ranking="g")]  # fmt: skip
    swapped = [_result("b200", 300, 80, None, ranking="k"), _result("h200", 100, 90, None,
                                                                    ranking="k")]  # fmt: skip
    missed = [_result("b200", 300, float("nan"), None, "none", ranking="m"),
              _result("h200", 100, 90, None, ranking="m")]  # fmt: skip
    g, k, m = validate.rankings([*match, *swapped, *missed])
    assert g["match"] and g["measured"] == g["predicted"] == ["b200", "h200"]
    assert (
        not k["match"] and k["measured"] == ["b200", "h200"] and k["predicted"] == ["h200", "b200"]
    )
    assert not m["match"] and m["predicted"] == ["h200", "b200"]  # no prediction: last
    text = validate.text([*match, *swapped])
    assert "ranking g at tokens_per_s_per_user>=5: match" in text
    assert (
        "ranking k at tokens_per_s_per_user>=5: MISMATCH; measured b200 > h200; "
        "predicted h200 > b200" in text
    )


def _manifest(tmp_path: Path, intervals: str, table: str = "ci95", extra: str = "") -> Path:
    folder = tmp_path / "calibration"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "h100.toml").write_text(f'spec = "h100"\ndata = []\n[{table}]\n{intervals}\n{extra}')
    return folder


POINT = """
[[row]]
id = "p"
class = "middle"
scenario = "llama8b-h100-serving"
metric = "tokens_per_s_per_gpu"
measured = "{measured}"
set = [{sets}]
source = "a test"
url = "https://example.org"
"""


def test_point_band_bounds_the_metric_over_the_calibration_interval(tmp_path):
    """A row's band is its metric's range over the manifest's 95% interval of a value its
    hardware spec file set: every sampled efficiency in the interval predicts inside it, and
    the ends are attained (at the interval's ends, the metric being monotone in it)."""
    folder = _manifest(tmp_path, '"hbm_efficiency" = "0.80..0.88"')
    rows = validate.load_rows([_table(tmp_path, POINT.format(measured="9000 tokens/s", sets=""))])
    (r,) = validate.predict(rows, intervals=bands.calibration_intervals(folder))
    assert r.band is not None
    lo, hi = r.band
    assert lo < r.predicted < hi  # the spec's 0.8472 lies inside
    model = build_model(SCENARIO)
    rng = random.Random(7)
    xs = np.array([0.80, 0.88, *(rng.uniform(0.80, 0.88) for _ in range(64))])
    got = np.asarray(model.evaluate({"hardware.hbm_efficiency": xs})["tokens_per_s_per_gpu"])
    assert np.all(got >= lo * (1 - 1e-12)) and np.all(got <= hi * (1 + 1e-12))
    assert min(got) == pytest.approx(lo, rel=1e-9) and max(got) == pytest.approx(hi, rel=1e-9)
    assert r.inside is (lo <= 9000 <= hi)


def test_a_band_takes_the_prediction_intervals_over_the_confidence_intervals(tmp_path):
    """Where a manifest states both, the band is the metric over the ``[pi95]`` box: the wider
    prediction interval of a value its spec file set, not the ``[ci95]`` one."""
    row = POINT.format(measured="9000 tokens/s", sets="")
    bands_of = {}
    for name, folder in (
        ("ci", _manifest(tmp_path / "ci", '"hbm_efficiency" = "0.80..0.88"')),
        (
            "both",
            _manifest(
                tmp_path / "both",
                '"hbm_efficiency" = "0.70..0.95"',
                "pi95",
                '[ci95]\n"hbm_efficiency" = "0.80..0.88"\n',
            ),
        ),
        ("pi", _manifest(tmp_path / "pi", '"hbm_efficiency" = "0.70..0.95"', "pi95")),
    ):
        rows = validate.load_rows([_table(tmp_path, row)])
        (r,) = validate.predict(rows, intervals=bands.calibration_intervals(folder))
        bands_of[name] = r.band
    assert bands_of["both"] == bands_of["pi"]
    assert bands_of["pi"][0] < bands_of["ci"][0] < bands_of["ci"][1] < bands_of["pi"][1]


def test_an_interval_applies_only_where_the_spec_file_set_the_value(tmp_path):
    """A row that sets the calibrated field itself has no calibration band."""
    folder = _manifest(tmp_path, '"hbm_efficiency" = "0.80..0.88"')
    text = POINT.format(measured="9000 tokens/s", sets='"hardware.hbm_efficiency=0.85"')
    (r,) = validate.predict(validate.load_rows([_table(tmp_path, text)]),
                            intervals=bands.calibration_intervals(folder))  # fmt: skip
    assert r.band is None and r.inside is None


@pytest.mark.parametrize(
    ("intervals", "key", "problem"),
    [
        ('"hbm_efficiency" = "0.9"', "ci95.hbm_efficiency", "not a range"),
        ('"hbm_efficiency" = "0.9..0.8"', "ci95.hbm_efficiency", "low end above"),
        ('"hbm_efficiency" = "0.1..0.2"', "ci95.hbm_efficiency", "does not hold"),
        ('"hbm_efficiency" = "0.9"', "pi95.hbm_efficiency", "not a range"),
        ('"hbm_efficiency" = "0.1..0.2"', "pi95.hbm_efficiency", "does not hold"),
    ],
)
def test_bad_intervals_are_one_line_errors(tmp_path, intervals, key, problem):
    folder = _manifest(tmp_path, intervals, key.split(".")[0])
    rows = validate.load_rows([_table(tmp_path, POINT.format(measured="9000 tokens/s", sets=""))])
    with pytest.raises(SpecError) as e:
        validate.predict(rows, intervals=bands.calibration_intervals(folder))
    assert e.value.where == str(folder / "h100.toml") and e.value.key == key
    assert problem in e.value.problem


def test_frontier_band_is_the_search_at_the_ranged_inputs_ends(tmp_path):
    """A frontier row's band: the best at the target searched again with the interval at its
    pessimistic end and at its optimistic end, each the same as the brute-force best there."""
    folder = _manifest(tmp_path, '"hbm_efficiency" = "0.80..0.88"')
    rows = validate.load_rows([_table(tmp_path, _row("a", "tokens_per_s_per_user>=50"))])
    (r,) = validate.predict(rows, intervals=bands.calibration_intervals(folder))
    assert r.band is not None
    low = _brute_best(50.0, ("hardware.hbm_efficiency=0.80",))
    high = _brute_best(50.0, ("hardware.hbm_efficiency=0.88",))
    assert r.band == pytest.approx((low, high), rel=1e-9)
    assert r.band[0] <= r.predicted <= r.band[1]


def test_partial_overlap_hides_its_share_of_the_shorter_lane():
    """Two lanes of one two-batch-overlap stage: a timeline where η of the shorter lane runs
    under the longer and the rest after it ends at max + (1 − η)·min; η = 1 is the Max (the old
    perfect overlap), η = 0 the sum; other overlap tags stay a plain Max."""
    a, b = parameter("test_vf.compute", TIME), parameter("test_vf.comm", TIME)
    eta = parameter("test_vf.hidden", DIMENSIONLESS)
    terms = [Term("c", a, "t", "w", "moe", "tbo.experts/compute"),
             Term("m", b, "t", "w", "comm", "tbo.experts/comm")]  # fmt: skip
    rng = random.Random(3)
    for _ in range(20):
        va, vb, ve = rng.uniform(0, 5e-3), rng.uniform(0, 5e-3), rng.uniform(0, 1)
        longer, shorter = max(va, vb), min(va, vb)
        # the timeline: the shorter lane's hidden part inside [0, longer], the rest after it
        end = max(longer, ve * shorter) + (1 - ve) * shorter
        got = float(compose_step_time(terms, eta).subs({a: va, b: vb, eta: ve}))
        assert got == pytest.approx(end, rel=1e-12)
    assert compose_step_time(terms) == sp.Max(a, b)
    side = [attrs.evolve(t, overlap=f"shared/{t.group}") for t in terms]
    assert compose_step_time(side, eta) == sp.Max(a, b)


def _stages(model, ev, eta: float) -> float:
    """The step from the model's own terms: plain terms add; each overlap tag's lanes take
    their max plus (1 − η) of the rest when the tag is two-batch overlap's."""
    plain, tagged = 0.0, {}
    for t in model.terms:
        v = float(np.asarray(ev["terms"][t.name]))
        if not t.overlap:
            plain += v
            continue
        tag, _, lane = t.overlap.partition("/")
        lanes = tagged.setdefault(tag, {})
        lanes[lane or t.group] = lanes.get(lane or t.group, 0.0) + v
    for tag, lanes in tagged.items():
        hidden = eta if tag.startswith("tbo.") else 1.0
        longest = max(lanes.values())
        plain += longest + (1 - hidden) * (sum(lanes.values()) - longest)
    return plain


def test_overlap_efficiency_defaults_to_the_perfect_overlap():
    """Unset, engine.overlap_efficiency is 1: a two-batch-overlap scenario's step is its plain
    terms plus each stage's slower side, as before; at 0.5 each stage adds half its faster
    side. The vLLM H200 EP-32 scenario states it as the range 0.5..1 (nominal 1)."""
    model = build_model("dsv3-h100-ep72-decode")
    assert any(t.overlap.startswith("tbo.") for t in model.terms)
    for eta in (1.0, 0.5):
        ev = model.evaluate({} if eta == 1 else {"engine.overlap_efficiency": eta})
        assert float(ev["step_time_s"]) == pytest.approx(_stages(model, ev, eta), rel=1e-12)
    ranged = build_model("dsv3-h200-ep32-decode").scenario
    assert ranged.ranges == {"engine.overlap_efficiency": (0.5, 1.0)}
    assert ranged.values[ranged.by_path["engine.overlap_efficiency"]] == 1.0


def test_frontier_plot_is_deterministic_svg():
    """The frontier plot's bytes depend only on what is drawn: no date, the same bytes twice."""
    line = ("h100", [10.0, 50.0, 90.0], [900.0, 500.0, 100.0])
    low = ("", [9.0, 45.0, 80.0], [800.0, 450.0, 90.0])
    high = ("", [11.0, 55.0, 99.0], [990.0, 550.0, 110.0])
    args = ([(line, low, high), (line, None, None)], [(0, 50.0, 480.0)], "x", "y", "t")
    first = plot_frontier_band(*args)
    assert first == plot_frontier_band(*args)
    assert b"<svg" in first and b"dc:date" not in first


def test_a_stated_range_of_the_base_scenario_bands_the_frontier(tmp_path):
    """The base scenario's engine overrides (here a ranged memory efficiency, in a scenario
    derived with ``from``) reach the search, and the stated range bands the best like an
    interval: the brute-force best at each end of the range."""
    (tmp_path / "s.toml").write_text(
        f'from = "{SCENARIO}"\n[engine]\nmemory_efficiency = "0.6..0.8 (0.7)"\n'
    )
    text = _row("a", "tokens_per_s_per_user>=50", scenario="s.toml")
    (r,) = validate.predict(validate.load_rows([_table(tmp_path, text)]), intervals={})
    assert r.predicted == pytest.approx(_brute_best(50.0, ("engine.memory_efficiency=0.7",)))
    ends = [_brute_best(50.0, (f"engine.memory_efficiency={v}",)) for v in (0.6, 0.8)]
    assert r.band == pytest.approx(tuple(ends), rel=1e-9)


REPORT = """
name = "vt"
title = "frontier rows"
[scenarios]
x = "llama8b-h100-serving"
[[block]]
kind = "validation"
id = "v"
tables = ["t.toml"]
"""


def test_the_page_shows_frontier_rows_and_a_plot_per_gpu(tmp_path):
    """The validation block lists each frontier row's configuration and ranking group and
    draws one frontier plot per GPU (test_frontier_plot_is_deterministic_svg: its bytes)."""
    text = _row("a", "tokens_per_s_per_user>=50", extra='ranking = "g"') + _row(
        "b", "tokens_per_s_per_user>=50", scenario="llama8b-h200-serving", extra='ranking = "g"'
    )
    _table(tmp_path, text)
    (tmp_path / "r.toml").write_text(REPORT)
    assert main(["report", str(tmp_path / "r.toml"), "-o", str(tmp_path / "v.md")]) == 0
    files = sorted(f.name for f in (tmp_path / "v").iterdir())
    assert files == ["v-frontier-h100.svg", "v-frontier-h200.svg", "v.csv", "v.svg"]
    page = (tmp_path / "v.md").read_text()
    assert "| a | `tokens_per_s_per_user>=50` | 1 GPU tp1" in page
    assert "- **g** at `tokens_per_s_per_user>=50`: " in page
    assert "![h100 frontiers](v/v-frontier-h100.svg)" in page
