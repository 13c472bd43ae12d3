"""The explorer in a real browser: headless Chromium (the system's ``chromium``) driven by
Playwright, the page loaded from ``file://`` with the network cut off. Every number the page
shows must equal ``stepwall eval --json`` at the same settings, the wall ``stepwall derive
… wall``, a violated constraint must be shown as eval says it, and the page must be legible
at 1280×800 (a screenshot is saved; set STEPWALL_SCREENSHOT=path.png to keep it).

Skipped, with the reason, when Playwright or a Chromium executable is missing (`.ci/run`
installs both)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sympy as sp

from stepwall.apps.explore import js_function

SCENARIO = "k26-b300-tp8-ddtree"
FREE = [
    "parallel.tp",
    "parallel.ep",
    "workload.concurrency",
    "workload.context",
    "hardware.hbm_bandwidth",
    "decoding.draft_time",
    "cluster.scale_up.bus_bandwidth",
]

pytestmark = pytest.mark.slow  # drives a browser: the slow tier

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')"
)
# A scenario with two-batch overlap (a Max over lanes in the step time), EP over 72 GPUs and
# the default controls, checked at its spec values and random settings too.
OTHER = "k26-gb300nvl72-ep72"
CHROMIUM = (
    os.environ.get("STEPWALL_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
)  # fmt: skip
if CHROMIUM is None:
    pytest.skip(
        "no chromium executable on PATH (apt-get install -y chromium; .ci/run does it; "
        "STEPWALL_CHROMIUM=path names another)",
        allow_module_level=True,
    )


def run(*args: str) -> str:
    """Run the command line (its entry point, in this process: no interpreter start-up per
    call); what it printed."""
    from stepwall.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, err.getvalue()
    return out.getvalue()


def stepwall(*args: str) -> dict[str, Any]:
    """`stepwall ARGS` (with --json) parsed."""
    doc: dict[str, Any] = json.loads(run(*args))
    return doc


def explore(scenario: str, folder: Path, *args: str) -> Path:
    """`stepwall explore` as a user runs it; the page's path."""
    path = folder / f"{scenario}.html"
    assert run("explore", scenario, *args, "-o", str(path)).startswith(f"wrote {path}")
    return path


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return explore(SCENARIO, tmp_path_factory.mktemp("explore"), "--free", ",".join(FREE))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, html: Path) -> Iterator[Any]:
    with opened(browser, html) as pg:
        yield pg


@contextlib.contextmanager
def opened(browser: Any, html: Path) -> Iterator[Any]:
    """The page at 1280×800, every request but the file itself refused (offline), console
    errors collected (the test fails on any)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    requests: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        requests.append(r.request.url)
        if r.request.url == html.as_uri():
            r.continue_()
        else:
            r.abort()

    context.route("**/*", route)
    pg = context.new_page()
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(html.as_uri())
    pg.wait_for_function("window.stepwallTiming && window.stepwallTiming.firstPaint !== null")
    yield pg
    assert requests == [html.as_uri()], f"the page asked for {requests[1:]}"
    assert not errors, errors
    context.close()


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=1e-300)


def controls(pg: Any) -> dict[str, dict[str, Any]]:
    return {c["path"]: c for c in pg.evaluate("window.stepwallExplorer.controls")}


def set_control(pg: Any, path: str, shown: str) -> str:
    """Type a value (in the control's unit) and return what the page uses, in SI."""
    box = f"#control-{path.replace('.', '-')}"
    pg.fill(box, shown)
    value: str = pg.get_attribute(box, "data-value")
    return value


def settings(pg: Any, rng: random.Random) -> list[str]:
    """Random values on every control (whole numbers for counts), typed in; the --set
    arguments that say the same in SI units."""
    sets = []
    for path, c in controls(pg).items():
        if c["integer"]:
            hi = min(c["hi"], 64.0 if path.startswith("parallel.") else 2048.0)
            v = rng.randint(max(1, int(c["lo"])), int(hi))
            shown = str(v)
        else:
            lo, hi = c["lo"], c["hi"]
            v = lo * (hi / lo) ** rng.random() if lo > 0 else lo + (hi - lo) * rng.random()
            shown = f"{v / 10 ** c['exp']:.4g}"
        si = set_control(pg, path, shown)
        unit = pg.evaluate(f"window.stepwallExplorer.siUnit({json.dumps(path)})")
        sets += ["--set", f"{path}={si} {unit}".strip()]
    return sets


def value(pg: Any, selector: str) -> float:
    raw = pg.get_attribute(selector, "data-value")
    assert raw is not None, selector
    return float(raw)


MEMORY = {
    "memory_bytes_per_gpu": "bytes_per_gpu",
    "memory_capacity_per_gpu": "capacity_per_gpu",
    "weight_bytes_per_gpu": "weight_bytes_per_gpu",
    "kv_bytes_per_gpu": "kv_bytes_per_gpu",
}


# Metrics of the model (stepwall.numeric.compiled.METRICS) that `eval --json` does not print:
# checked
# against the evaluator eval runs (the same compiled function, in this process) instead.
NOT_IN_EVAL_JSON: set[str] = set()


def evaluator(sets: list[str], scenario: str = SCENARIO) -> dict[str, Any]:
    """What `stepwall eval` computes at ``sets`` (the --set arguments), in this process."""
    from stepwall.model.compose import build_model

    values: dict[str, Any] = build_model(scenario, sets[1::2]).evaluate()
    return values


def compare(pg: Any, doc: dict[str, Any], sets: list[str] | None = None) -> int:
    """Every value the page shows against eval's document (``sets``: the --set arguments it
    was made with); returns how many were compared."""
    scenario = doc["scenario"]
    n = 0
    ev: dict[str, Any] | None = None
    for el in pg.query_selector_all("[id^='metric-']"):
        name = el.get_attribute("id").removeprefix("metric-")
        raw = el.get_attribute("data-value")
        if name == "memory_fits":
            assert raw == str(doc["memory"]["fits"]).lower()
        elif name in MEMORY:
            assert close(float(raw), doc["memory"][MEMORY[name]]), name
        elif name in doc:
            assert close(float(raw), float(doc[name])), (name, raw, doc[name])
        else:
            assert name in NOT_IN_EVAL_JSON, f"the page shows {name}, which eval does not"
            ev = ev or evaluator(sets or [], scenario)
            assert close(float(raw), float(ev[name])), (name, raw, ev[name])
        n += 1
    for g, seconds in doc["groups"].items():
        assert close(value(pg, f"#group-{g}"), seconds), g
        n += 1
    for t in doc["terms"]:
        assert close(value(pg, f"#term-{t['name'].replace('.', '-')}"), t["seconds"]), t["name"]
        n += 1
    feasible = pg.get_attribute("#results", "data-feasible")
    assert feasible == str(doc["feasible"]).lower()
    shown = pg.eval_on_selector_all(
        "#violations li",
        "els => els.map(e => [e.dataset.constraint, e.querySelector('.msg').textContent])",
    )
    assert [c for c, _ in shown] == [v["constraint"] for v in doc["violations"]]
    for (_, line), v in zip(shown, doc["violations"], strict=True):
        assert v["message"].endswith(line), (v["message"], line)  # eval adds the file
    return n


def test_page_equals_eval_at_random_settings(page: Any) -> None:
    rng = random.Random(20240614)
    compared = compare(page, stepwall("eval", SCENARIO, "--json"))
    assert compared > 30
    for _ in range(4):
        sets = settings(page, rng)
        doc = stepwall("eval", SCENARIO, "--json", "--allow-infeasible", *sets)
        compare(page, doc, sets)


def test_overlapped_scenario_with_default_controls_equals_eval(
    browser: Any, tmp_path: Path
) -> None:
    """Another shape: two-batch overlap (a Max of lanes), EP across an NVL72 rack, and the
    controls `stepwall explore` picks by itself (degrees, concurrency, the most elastic)."""
    html = explore(OTHER, tmp_path)
    rng = random.Random(72)
    with opened(browser, html) as pg:
        assert len(controls(pg)) >= 6
        assert compare(pg, stepwall("eval", OTHER, "--json")) > 30
        for _ in range(2):
            sets = settings(pg, rng)
            compare(pg, stepwall("eval", OTHER, "--json", "--allow-infeasible", *sets), sets)


def test_ids_and_provenance_are_shown(page: Any) -> None:
    """The stable ids tools read, the scenario's metrics all present, the provenance block
    (spec files with their SHA-256, versions, the command) visible."""
    from stepwall.model.compose import build_model
    from stepwall.model.metrics import METRICS

    model = build_model(SCENARIO)
    shown = {e.get_attribute("id") for e in page.query_selector_all("[id^='metric-']")}
    assert {f"metric-{m}" for m in METRICS if m in model.metrics} <= shown
    assert page.locator("#metric-tokens_per_s_per_user").is_visible()
    assert page.locator("#control-parallel-tp").is_visible()
    prov = page.locator("#provenance")
    prov.scroll_into_view_if_needed()
    assert prov.is_visible()
    text = prov.inner_text()
    assert "specs/hardware/b300.toml" in text and "sympy" in text
    assert "stepwall explore k26-b300-tp8-ddtree" in text
    hashes = page.eval_on_selector_all("#provenance td code", "els => els.map(e => e.textContent)")
    assert sum(len(h) == 64 and all(c in "0123456789abcdef" for c in h) for h in hashes) >= 3


def test_lambertw_in_the_page_is_mpmath_s(page: Any) -> None:
    """Lambert's W, which no JavaScript library has, on both real branches against sympy's
    (mpmath's) value; NaN where it is complex."""
    xs0 = [-0.36787944, -0.3678, -0.3, -0.1, -1e-9, 0.0, 1e-12, 0.5, 1.0, 2.5, 3.0, 10.0,
           1e3, 1e10, 1e300]  # fmt: skip
    xs1 = [-0.36787944, -0.3678, -0.3, -0.25, -0.1, -1e-3, -1e-12, -1e-200]
    got0 = page.evaluate("xs => xs.map(x => lambertw(x, 0))", xs0)
    got1 = page.evaluate("xs => xs.map(x => lambertw(x, -1))", xs1)
    for xs, got, k in ((xs0, got0, 0), (xs1, got1, -1)):
        for x, w in zip(xs, got, strict=True):
            want = float(sp.LambertW(sp.Float(x, 30), k).evalf(30))
            assert close(w, want, 1e-13), (k, x, w, want)
    # the branch point (the double nearest −1/e), and NaN where W is complex (or no branch)
    assert page.evaluate("[lambertw(-1 / Math.E, 0), lambertw(-1 / Math.E, -1)]") == [-1, -1]
    nan = page.evaluate("[lambertw(-1, 0), lambertw(0.5, -1), lambertw(1, 2)]")
    assert all(math.isnan(v) for v in nan), nan


def test_violated_constraint_is_shown(page: Any) -> None:
    set_control(page, "parallel.tp", "3")
    li = page.locator("#violations li[data-constraint='heads_by_tp']")
    assert li.is_visible()
    assert "3 does not divide model.n_heads = 64" in li.inner_text()
    assert "parallel.tp = 4 satisfies every constraint" in li.inner_text()
    assert "infeasible" in (page.get_attribute("#results", "class") or "")
    assert page.locator("#status").is_visible()
    # greyed: the performance numbers (computed, not attainable), not GPUs and memory (why)
    opacity = "e => Number(getComputedStyle(e).opacity)"
    assert page.eval_on_selector("#metric-tokens_per_s_per_user", opacity) < 0.5
    assert page.eval_on_selector("#metric-ttft_s", opacity) < 0.5
    assert page.eval_on_selector("#metric-gpus", opacity) == 1
    assert page.eval_on_selector("#metric-memory_bytes_per_gpu", opacity) == 1
    sets = ["--set", "parallel.tp=3"]
    compare(page, stepwall("eval", SCENARIO, "--json", "--allow-infeasible", *sets), sets)
    set_control(page, "parallel.tp", "8")
    assert page.locator("#violations li").count() == 0


def test_reset_puts_every_control_back(page: Any) -> None:
    spec = {path: c["value"] for path, c in controls(page).items()}
    set_control(page, "parallel.tp", "16")
    set_control(page, "hardware.hbm_bandwidth", "12.5")
    page.click("#reset")
    for path, v in spec.items():
        assert float(page.get_attribute(f"#control-{path.replace('.', '-')}", "data-value")) == v
    compare(page, stepwall("eval", SCENARIO, "--json"))


@pytest.mark.parametrize("sets", [[], ["hardware.hbm_bandwidth=10", "parallel.tp=16"],
                                  ["workload.concurrency=64", "parallel.ep=2"]])  # fmt: skip
def test_wall_is_derive_s(page: Any, sets: list[str]) -> None:
    """The wall the chart marks follows the controls and equals `stepwall derive … wall`."""
    units = {"hardware.hbm_bandwidth": " TB/s"}
    args = []
    for s in sets:
        key, _, v = s.partition("=")
        set_control(page, key, v)
        args += ["--set", f"{key}={v}{units.get(key, '')}"]
    page.select_option("#chart-metric", "step_time_s")
    page.select_option("#chart-key", "parallel.tp")
    d = stepwall("derive", SCENARIO, *args, "wall", "parallel.tp", "--json", "--allow-infeasible")
    got = page.get_attribute("#wall", "data-value")
    if d["value"] is None:
        assert got is None
        return
    assert got is not None and math.isclose(float(got), d["value"], rel_tol=1e-5)
    whole = page.get_attribute("#wall", "data-whole")
    assert (int(whole) if whole else None) == d["feasible_value"]
    assert "Wall: parallel.tp" in page.inner_text("#chart-note")


def test_optimum_is_a_feasible_point_at_eval_s_value(page: Any) -> None:
    page.select_option("#chart-metric", "tokens_per_s_per_gpu")
    page.select_option("#chart-key", "workload.concurrency")
    best = page.get_attribute("#optimum", "data-value")
    assert best is not None and "Optimum" in page.inner_text("#chart-note")
    doc = stepwall("eval", SCENARIO, "--json", "--set", f"workload.concurrency={best}")
    assert doc["feasible"]
    assert close(float(page.get_attribute("#optimum", "data-metric")), doc["tokens_per_s_per_gpu"])
    for c in (1, 2 * int(best)):  # elsewhere: less, or a constraint fails
        other = stepwall("eval", SCENARIO, "--json", "--allow-infeasible", "--set",
                         f"workload.concurrency={c}")  # fmt: skip
        worse = other["tokens_per_s_per_gpu"] <= doc["tokens_per_s_per_gpu"] * (1 + 1e-12)
        assert worse or not other["feasible"]


def test_printer_computes_what_python_computes(page: Any) -> None:
    """sympy → JavaScript for every node kind the models use, against lambdify('math')."""
    x, y, z = sp.symbols("x y z", real=True)
    exprs = [
        sp.Piecewise((x * y, x < y), (y - x, sp.Eq(x, 2)), (z, True)),
        sp.Max(x, y, z) + sp.Min(x, 2 * y),
        sp.ceiling(x / y) + sp.floor(z * x),
        sp.log(sp.Abs(x) + 1) / sp.log(2) + sp.exp(-sp.Abs(y)),
        sp.Mod(x, y) + sp.Mod(-sp.Abs(z), y),
        sp.Rational(1, 3) * x**-2 + y ** sp.Rational(1, 2) * 0 + (sp.Abs(z) + 1) ** 0.7,
    ]
    rels = [sp.And(x >= 1, sp.Eq(sp.Mod(x, 2), 0)), sp.Or(x < y, sp.Ne(y, z))]
    code = js_function("probe", [x, y, z], [*exprs, *rels])
    fn = sp.lambdify([x, y, z], [*exprs, *rels], modules="math", cse=True)
    rng = random.Random(7)
    points = [[rng.choice([-3.0, -1.5, 1.0, 2.0, 3.0, 4.5]) for _ in range(3)] for _ in range(40)]
    points = [p for p in points if p[0] != 0 and p[1] != 0]
    got = page.evaluate(f"(pts) => {{ {code}; return pts.map(probe); }}", points)
    for p, row in zip(points, got, strict=True):
        want = fn(*p)
        for a, b in zip(row, want, strict=True):
            if isinstance(b, bool):
                assert a is b, p
            else:
                assert close(float(a), float(b), 1e-12), (p, a, b)


def test_screenshot_is_legible(page: Any, tmp_path: Path) -> None:
    """Nothing overflows the 1280-pixel viewport, no text is clipped in the cards, the main
    panels do not overlap; the screenshot is kept for a person to look at."""
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    clipped = page.evaluate(
        "[...document.querySelectorAll('.card .value, .control label, .panel-head')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"
    )
    assert not clipped, clipped
    panels = ("#controls-panel", "#metrics", "#breakdown-panel", "#constraints-panel",
              "#chart-panel")  # fmt: skip
    boxes = {s: page.locator(s).bounding_box() for s in panels}
    names = list(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            p, q = boxes[a], boxes[b]
            apart = (p["x"] + p["width"] <= q["x"] + 0.5 or q["x"] + q["width"] <= p["x"] + 0.5
                     or p["y"] + p["height"] <= q["y"] + 0.5
                     or q["y"] + q["height"] <= p["y"] + 0.5)  # fmt: skip
            assert apart, (a, b)
    assert boxes["#chart-panel"]["y"] + boxes["#chart-panel"]["height"] <= 800  # above the fold
    shot = Path(os.environ.get("STEPWALL_SCREENSHOT") or tmp_path / "explorer.png")
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000


def test_first_paint_and_update_are_measured(page: Any) -> None:
    timing = page.evaluate("window.stepwallTiming")
    assert timing["firstPaint"] > 0 and timing["update"] >= 0 and timing["updates"] >= 1
