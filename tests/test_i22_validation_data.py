"""Issue 22's validation data: the MiniMax-M2.5 model spec, the middle table and the two drafts.

The model spec is checked against what its publisher states (parameter counts, the weight
memory and the KV cache per million tokens of the vLLM deployment guide), computed from the
architecture fields with the papers' formulas and from the plugin's own byte accounting. The
tables are checked on their own terms: a middle row sits at 8-256 requests per replica, every
row names its source, and the frontier rows cover the GPUs, engines, shapes and interactivity
the issue asks for.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from stepwall.apps import validate
from stepwall.core.units import parse_quantity
from stepwall.model.compose import build_model

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
TABLES = SPECS / "validation"
MINIMAX = "minimax-m25-h200-tep8-vllm"  # the scenario that uses minimax-m2.5-fp8
WEIGHT_BITS = ("expert_bits", "shared_expert_bits", "attention_bits", "dense_bits",
               "embedding_bits")  # fmt: skip
GB, GIB = 1e9, 2.0**30


def _toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


def _minimax_counts() -> tuple[float, float]:
    """(total, active) parameters of MiniMax-M2.5 from its architecture fields: GQA projections
    2·h·H·d + 2·h·H_kv·d, gated experts of 3·h·I, a router of h·E per layer, untied embedding
    and LM head of V·h; active counts the k routed experts a token uses and the LM head."""
    m = _toml(SPECS / "models" / "minimax-m2.5-fp8.toml")
    h, layers, d = m["hidden"], m["n_layers"], m["head_dim"]
    attention = 2 * h * m["n_heads"] * d + 2 * h * m["n_kv_heads"] * d
    expert = 3 * h * m["expert_intermediate"]
    common = layers * (attention + h * m["n_experts"]) + m["vocab"] * h
    total = common + layers * m["n_experts"] * expert + m["vocab"] * h
    active = common + layers * m["experts_per_token"] * expert
    return float(total), float(active)


def test_minimax_counts_are_the_published_230b_and_10b() -> None:
    """MiniMax-AI/MiniMax-M2 README: 230 billion total parameters, 10 billion active (both
    rounded; the architecture gives 228.7B and 10.4B)."""
    total, active = _minimax_counts()
    assert total == pytest.approx(230e9, rel=0.01)
    assert active == pytest.approx(10e9, rel=0.05)


def test_the_plugin_holds_every_minimax_parameter() -> None:
    """Resident weight bytes on one GPU with every weight at 8 bits are the parameter count."""
    sets = ["parallel.tp=1", "parallel.ep=1"] + [f"model.{b}=8 bit" for b in WEIGHT_BITS]
    held = float(build_model(MINIMAX, sets).evaluate()["weight_bytes_per_gpu"])
    assert held == pytest.approx(_minimax_counts()[0], rel=1e-9)


def _one_gpu(context: int) -> dict[str, Any]:
    sets = ["parallel.tp=1", 'workload.kind="decode"', "workload.concurrency=1",
            f"workload.context={context}"]  # fmt: skip
    return dict(build_model(MINIMAX, sets).evaluate())


def test_minimax_memory_is_the_vllm_guides() -> None:
    """MiniMax-AI/MiniMax-M2.5 docs/vllm_deploy_guide.md: '220 GB for weights, 240 GB per 1M
    context tokens'. The guide's GB may be decimal or binary: each figure must lie between
    its two readings (2% either way for the rounding)."""
    ev = _one_gpu(1_000_000)
    weights, kv = float(ev["weight_bytes_per_gpu"]), float(ev["kv_bytes_per_gpu"])
    assert 220 * GB * 0.98 <= weights <= 220 * GIB * 1.02
    assert 240 * GB * 0.98 <= kv <= 240 * GIB * 1.02


def _scenario(name: str) -> dict[str, Any]:
    return _toml(SPECS / "scenarios" / f"{name}.toml")


def _hardware(scenario: str) -> str:
    return str(_scenario(scenario)["hardware"])


def _engine(scenario: str) -> str:
    engine = _scenario(scenario).get("engine")
    return str(engine.get("from") if isinstance(engine, dict) else engine)


def _concurrency(row: dict[str, Any]) -> int:
    """Requests in flight per replica: the row's workload.concurrency, else its scenario's."""
    given = [s for s in row.get("set", []) if s.startswith("workload.concurrency=")]
    if given:
        return int(given[0].split("=")[1])
    return int(_scenario(row["scenario"])["workload"]["concurrency"])


def test_middle_rows_are_in_the_middle() -> None:
    """Every middle row is at 8-256 requests per replica; the table has at least 10 rows, over
    3 GPUs and 2 engines, and loads (test_validate predicts every shipped row, these included,
    and requires each feasible)."""
    rows = validate.load_rows([TABLES / "middle.toml"])
    raw = _toml(TABLES / "middle.toml")["row"]
    assert len(rows) == len(raw) >= 10
    for r in raw:
        assert r["class"] == "middle"
        assert 8 <= _concurrency(r) <= 256, r["id"]
    assert len({_hardware(r["scenario"]) for r in raw}) >= 3
    assert len({_engine(r["scenario"]) for r in raw}) >= 2


DRAFTS = ("frontier.toml", "latency.toml")


@pytest.mark.parametrize("name", DRAFTS)
def test_draft_rows_name_their_source(name: str) -> None:
    """Each draft row has a unique id, a scenario in the catalog, a positive measured value, a
    source, an https url, a date, the figure as printed and notes."""
    rows = _toml(TABLES / name)["row"]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    for r in rows:
        assert (SPECS / "scenarios" / f"{r['scenario']}.toml").is_file(), r["id"]
        value, _ = parse_quantity(r["measured"])
        assert value > 0, r["id"]
        assert r["url"].startswith("https://") and r["source"].strip(), r["id"]
        assert r["date"][:2] == "20" and r["evidence"].strip() and r["notes"].strip(), r["id"]


def _interactivity(row: dict[str, Any]) -> float:
    metric, _, value = row["at"].partition(">=")
    assert metric == "tokens_per_s_per_user"
    return float(value)


def test_frontier_rows_cover_the_issue() -> None:
    """At least 12 frontier points over 3 GPUs, 2 engines and 2 ISL/OSL shapes, with targets at
    low (< 25), middle and high (>= 100 tokens/s per user) interactivity; a ranking group is
    one target on different GPUs."""
    rows = _toml(TABLES / "frontier.toml")["row"]
    assert len(rows) >= 12 and {r["class"] for r in rows} == {"frontier"}
    assert len({_hardware(r["scenario"]) for r in rows}) >= 3
    assert len({_engine(r["scenario"]) for r in rows}) >= 2
    shapes = {
        tuple(r["search"][r["search"].index(k) + 1] for k in ("--isl", "--osl")) for r in rows
    }
    assert len(shapes) >= 2
    targets = [_interactivity(r) for r in rows]
    assert min(targets) < 25 and max(targets) >= 100
    assert any(25 <= t < 100 for t in targets)
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("ranking"):
            groups.setdefault(r["ranking"], []).append(r)
    assert groups
    for members in groups.values():
        assert len({r["at"] for r in members}) == 1
        assert len({_hardware(r["scenario"]) for r in members}) == len(members) >= 2


def test_latency_rows_are_times_at_load() -> None:
    """At least 6 latency rows, each a TTFT, TPOT, ITL or end-to-end latency (a time)
    measured with more than one request in flight."""
    rows = _toml(TABLES / "latency.toml")["row"]
    assert len(rows) >= 6 and {r["class"] for r in rows} == {"latency"}
    for r in rows:
        assert r["metric"] in ("ttft_s", "ttft_p99_s", "tpot_s", "itl_s", "e2e_latency_s"), r["id"]
        _, dim = parse_quantity(r["measured"])
        assert dim == parse_quantity("1 s")[1], r["id"]
        assert _concurrency(r) > 1, r["id"]


WITHDRAWN = TABLES / "withdrawn"


def test_withdrawn_rows_are_not_scored_but_still_load() -> None:
    """A withdrawn table is outside the scored tables (none of its ids is in them), loads as a
    table (so `stepwall validate FILE` prices it) and says why in its description; its rows
    name their sources like any draft row."""
    files = sorted(WITHDRAWN.glob("*.toml"))
    assert files
    scored = {r.spec.id for r in validate.load_rows(validate.default_tables())}
    assert all(p.parent == TABLES for p in validate.default_tables())
    for path in files:
        doc = _toml(path)
        assert doc["description"].startswith("Withdrawn (not scored): "), path
        rows = validate.load_rows([path])
        assert len(rows) == len(doc["row"]) >= 1
        assert not {r.spec.id for r in rows} & scored, path
        for r in doc["row"]:
            assert r["url"].startswith("https://") and r["evidence"].strip(), r["id"]
