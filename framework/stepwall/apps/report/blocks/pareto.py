"""Block ``pareto``: a configuration search (`stepwall.apps.search`, what ``stepwall search``
runs) in a report: the frontiers of several hardware options on one chart (SVG), the
frontier points as CSV, and per target a table of each option's best configuration with
energy, cost, what binds it and the ranking (with how it moves when efficiencies move).

Placeholders: ``ID.evaluated``, ``ID.feasible``, ``ID.frontier_points``, and per target
``i`` (0, 1, …) ``ID.tI.ranking`` (text, "gb200 > b200 > h200") and ``ID.tI.LABEL.METRIC``
for each option's best point (LABEL: the option's label with non-identifier characters as
``_``), plus ``ID.tI.LABEL.low`` / ``.high`` with the efficiency spread; per option
``ID.LABEL.x_max`` (the frontier's largest x) and what its specs state:
``ID.LABEL.price_per_gpu_hour`` (USD/h), ``ID.LABEL.board_power`` (W), ``ID.LABEL.pue``;
with ``switch_points``, a table of the frontier's switch points and, per switch ``k``,
``ID.sK.tokens_per_s_per_user``, ``.tokens_per_s_per_gpu`` and ``.users_per_gpu``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.apps import search, switch
from stepwall.apps.report.placeholders import fill
from stepwall.apps.search import frontier_table
from stepwall.core.errors import SpecError
from stepwall.core.options import option
from stepwall.io import formats
from stepwall.plugin.entries import BlockKind, structured
from stepwall.spec.loader import CATALOG_DIRS, find_spec_file

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report

SHOWN = (
    "tokens_per_s_per_gpu",
    "tokens_per_s_per_user",
    "ttft_s",
    "joules_per_token",
    "tokens_per_s_per_mw",
    "usd_per_million_tokens",
)


@attrs.frozen
class ParetoOptions:
    id: str = option("an identifier: the SVG and CSV files' name and the placeholders' prefix")
    model: str = option("the model: catalog name or a path relative to the report")
    hardware: tuple[str, ...] = option("the GPU specs compared")
    clusters: tuple[str, ...] = option("the cluster of each hardware, in order (or one for all)")
    gpus: tuple[int, ...] = option(
        "deployment sizes in GPUs (default: each cluster's size)", default=()
    )
    batch: tuple[int, ...] = option(
        "users per attention rank searched (default: 1 … 2048)", default=()
    )
    engine: str = option("the engine profile (catalog name)", default="")
    workload: str = option("serving or decode", default="serving", choices=("serving", "decode"))
    isl: int = option("prompt tokens per request", default=1024)
    osl: int = option("output tokens per request", default=1024)
    decoding: tuple[str, ...] = option("decoding kinds searched", default=("autoregressive",))
    set: tuple[str, ...] = option("--set overrides in every variant", default=())
    x: str = option("the frontier's x axis", default="tokens_per_s_per_user")
    y: str = option("the frontier's y axis", default="tokens_per_s_per_gpu")
    objective: str = option(
        "what the best point at a target maximises", default="tokens_per_s_per_gpu"
    )
    targets: tuple[str, ...] = option('targets, e.g. "tokens_per_s_per_user>=50"', default=())
    where: tuple[str, ...] = option('filters every point passes, e.g. "ttft_s<=2s"', default=())
    spread: float = option("efficiency spread for the ranking's robustness (0: none)", default=0.1)
    switch_points: bool = option(
        "also derive where the best layout along each frontier changes (search's "
        "--switch-points: the crossing of the two layouts' curves, with its sensitivities)",
        default=False,
    )
    title: str = option("the chart's title (placeholders allowed)", default="")
    caption: str = option("shown under the chart (placeholders allowed)", default="")


# `stepwall search` options -> the block's keys for them
FLAGS = {"--hardware": "hardware", "--cluster": "clusters", "--gpus": "gpus", "--batch": "batch",
         "--isl": "isl", "--osl": "osl", "--decoding": "decoding", "--set": "set",
         "--spread": "spread", "--workload": "workload", "--engine": "engine",
         "--at": "targets", "--where": "where"}  # fmt: skip


def _ident(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", label)


def _cell(v: float | None, digits: int = 4) -> str:
    return "unknown" if v is None else f"{v:.{digits}g}"


def _entries(report: Report, o: ParetoOptions, at: str) -> dict[str, Any]:
    """The block's spec references, resolved (a catalog name as is, a path relative to the
    report made absolute), each file counted in the provenance."""

    def entry(ref: str, section: str, key: str) -> str:
        path = find_spec_file(
            ref, CATALOG_DIRS[section], where=report.where, key=at + key, base=report.path.parent
        )
        report.files.add(path.resolve())
        return ref if not ("/" in ref or ref.endswith(".toml")) else str(path)

    return {
        "model": entry(o.model, "model", "model"),
        "hardware": [entry(h, "hardware", "hardware") for h in o.hardware],
        "clusters": [entry(c, "cluster", "clusters") for c in o.clusters],
        "engine": entry(o.engine, "engine", "engine") if o.engine else "",
    }


def prepare(report: Report, given: dict[str, Any], at: str) -> ParetoOptions:
    """The block's keys, checked: a list given empty is an error, not the default."""
    for f in attrs.fields(ParetoOptions):
        if f.name in given and given[f.name] == []:
            raise report.err(at + f.name, "is an empty list", f.metadata["doc"])
    options: ParetoOptions = structured(report, ParetoOptions, given, at)
    return options


def compute(report: Report, o: ParetoOptions, at: str) -> Any:
    """The search's result: the block's work, which depends only on the specs and options."""

    try:
        refs = _entries(report, o, at)
        spec = search.Spec(
            search.check_metric(o.x, at + "x"),
            search.check_metric(o.y, at + "y"),
            search.check_metric(o.objective, at + "objective"),
            tuple(search.parse_condition(t, at + "targets") for t in o.targets),
            tuple(search.parse_condition(w, at + "where") for w in o.where),
        )
        plan = search.plan_search(
            refs["model"],
            refs["hardware"],
            refs["clusters"],
            gpus=o.gpus,
            engines=[refs["engine"]] if refs["engine"] else [],
            workload=o.workload,
            isl=o.isl,
            osl=o.osl,
            decoding=o.decoding,
            sets=o.set,
            batch=o.batch or search.DEFAULT_BATCH,
            spec=spec,
            registry=report.registry,
        )
        result = search.run_search(plan, spread=o.spread)
        if o.switch_points:
            found = switch.switch_points(result, report.registry)
            result = attrs.evolve(result, switches=tuple(found))
        return result
    except SpecError as e:
        if e.where == report.where:  # already names the report and the block's key
            raise
        if e.where.startswith(at):  # a metric or condition, checked under the block's key
            raise report.err(e.where, f"{e.key}: {e.problem}", e.expected) from None
        flag = FLAGS.get(e.key if e.where == "search" else e.where, "")
        if flag:  # a `stepwall search` option's own error: the block's key for it
            said = e.problem if e.where == "search" else f"{e.key}: {e.problem}"
            raise report.err(at + flag, said, e.expected) from None
        raise report.err(at.rstrip("."), f"{e.where}:{e.key}: {e.problem}", e.expected) from None


def render(report: Report, o: ParetoOptions, at: str) -> list[str]:
    report.claim(o.id, at + "id")
    result = report.computed(at, lambda: compute(report, o, at))
    _entries(report, o, at)  # the files, in this process's provenance
    plan = result.plan
    s = report.ns.scalars
    s[f"{o.id}.evaluated"] = float(result.evaluated)
    s[f"{o.id}.feasible"] = float(result.feasible)
    s[f"{o.id}.frontier_points"] = float(len(result.frontier))
    for opt in plan.options:  # the frontier's reach along x (the fastest per user, by default)
        xs = [p[o.x] for p in result.frontier if p["option"] == opt.label and p[o.x] is not None]
        s[f"{o.id}.{_ident(opt.label)}.x_max"] = max(xs) if xs else float("nan")
    for v in plan.variants:  # what each option states: price (USD/h), board power (W), PUE
        lab = _ident(v.option.label)
        for name, scale in (("price_per_gpu_hour", 3600.0), ("board_power", 1.0), ("pue", 1.0)):
            key = v.provides.get(name, "")  # the spec path of the requirement, by its kind
            if key in v.values:
                s[f"{o.id}.{lab}.{name}"] = v.values[key] * scale
    title = fill(o.title, report.ns, report.where, at + "title") or f"{o.model}: frontiers"
    report.outputs[f"{o.id}.svg"] = search.plot(result, title)
    report.outputs[f"{o.id}.csv"] = _csv(result)
    tables = [line for i, t in enumerate(result.best) for line in _target(report, o, i, t)]
    lines = [f"![{title}]({o.id}.svg)"]
    if o.caption:  # after the targets: it may name their placeholders
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    lines += [
        "",
        f"Frontier points ({len(result.frontier)} of {result.evaluated:,} "
        f"configurations, {result.feasible:,} feasible): [{o.id}.csv]({o.id}.csv)",
    ]
    return lines + tables + _switches(report, o, result)


def _switches(report: Report, o: ParetoOptions, result: Any) -> list[str]:
    """The frontier's switch points as a table (and ``ID.sK.METRIC`` placeholders); nothing
    unless asked for."""
    if result.switches is None:
        return []
    degrees = search.layout_degrees(result.plan)
    lines = ["", "**Switch points** (where the best layout along the frontier changes):", "",
             "| option | from | to | tokens/s per user | tokens/s per GPU | users per GPU | "
             "found by |", "|:---|:---|:---|---:|---:|---:|:---|"]  # fmt: skip
    for k, sp_ in enumerate(result.switches):
        for m in ("tokens_per_s_per_user", "tokens_per_s_per_gpu", "users_per_gpu"):
            v = sp_[m]
            report.ns.scalars[f"{o.id}.s{k}.{m}"] = float("nan") if v is None else float(v)
        how = sp_["method"] if sp_["users_per_gpu"] is not None else "no crossing"
        lines.append(f"| {sp_['option']} | {search.config_text(sp_['from'], degrees)} | "
                     f"{search.config_text(sp_['to'], degrees)} | "
                     f"{_cell(sp_['tokens_per_s_per_user'])} | "
                     f"{_cell(sp_['tokens_per_s_per_gpu'])} | {_cell(sp_['users_per_gpu'])} | "
                     f"{how} |")  # fmt: skip
    if not result.switches:
        lines.append("| | one layout holds each frontier | | | | | |")
    return lines


def _target(report: Report, o: ParetoOptions, i: int, t: dict[str, Any]) -> list[str]:
    s = report.ns.scalars
    prefix = f"{o.id}.t{i}"
    s[f"{prefix}.ranking"] = " > ".join(t["ranking"])
    rob = t.get("robustness")
    spans = {r["option"]: r for r in rob["options"]} if rob else {}
    filters = "".join(f", {w}" for w in o.where)
    lines = [
        "",
        f"**Best {t['objective']} at {t['target']}{filters}**",
        "",
        "| option | configuration | tokens/s per GPU | tokens/s per user | TTFT | J/token | "
        "tokens/s per MW | USD per 1M tokens | bound by |",
        "|:---|:---|---:|---:|---:|---:|---:|---:|:---|",
    ]
    for e in t["options"]:
        lab, p = e["option"], e["point"]
        if p is None:
            lines.append(f"| {lab} | none | | | | | | | {e['binding']} |")
            continue
        for m in SHOWN:
            s[f"{prefix}.{_ident(lab)}.{m}"] = float("nan") if p[m] is None else p[m]
        if lab in spans and spans[lab]["low"] is not None:
            s[f"{prefix}.{_ident(lab)}.low"] = spans[lab]["low"]
            s[f"{prefix}.{_ident(lab)}.high"] = spans[lab]["high"]
        c = p["config"]
        conf = (
            f"{c['gpus']} GPUs: TP{c['tp']} × EP{c['ep']} × DP{c['dp']}, {c['concurrency']} users"
        )
        if c["decoding"] != "autoregressive":
            conf += f", {c['decoding']}"
        ttft = "unknown" if p["ttft_s"] is None else f"{p['ttft_s'] * 1e3:.0f} ms"
        lines.append(
            f"| {lab} | {conf} | {_cell(p['tokens_per_s_per_gpu'])} | "
            f"{_cell(p['tokens_per_s_per_user'])} | {ttft} | {_cell(p['joules_per_token'], 3)} | "
            f"{_cell(p['tokens_per_s_per_mw'], 3)} | {_cell(p['usd_per_million_tokens'], 3)} | "
            f"{e['binding']} |"
        )
    if t["ranking"]:
        lines += ["", f"Ranking by {t['objective']}: {' > '.join(t['ranking'])}."]
    if rob and t["ranking"]:
        parts = [
            f"{r['option']} {_cell(r['low'])} to {_cell(r['high'])}"
            for r in rob["options"]
            if r["low"] is not None
        ]
        verdict = (
            "the ranking holds over these intervals"
            if rob["robust"]
            else "these may swap: " + "; ".join(f"{a} and {b}" for a, b in rob["may_swap"])
        )
        lines += [
            "",
            f"With every hardware efficiency ±{rob['spread']:.0%} (or its spec range): "
            f"{', '.join(parts)}; {verdict}.",
        ]
    return lines


def _csv(result: Any) -> bytes:
    """The frontier table `stepwall search -o F.csv` writes."""
    csv_format = next(f for f in formats.stepwall_formats() if f.name == "csv")
    return formats.render(csv_format, frontier_table(result)).encode()


BLOCK = BlockKind(
    "pareto",
    "a configuration search: frontiers of several hardware options on one chart, "
    "the best configuration at each target with energy, cost and what binds it",
    ParetoOptions,
    render,
    early=True,
    prepare=prepare,
    compute=compute,
)

__all__ = ["BLOCK"]
