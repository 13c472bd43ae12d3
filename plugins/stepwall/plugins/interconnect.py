"""Interconnects: a scale-up domain (``nvlink``, ``pcie`` or ``infinity-fabric``) and a scale-out
network (``infiniband`` or ``none``). Collectives inside a domain pick the cheapest algorithm,
as an engine's strategy table and NCCL's tuner would: an all-reduce among ring, tree, in-switch
and, where the domain states it, the one-shot custom kernel engines run at small sizes, unless
the engine states its own law for the fabric (the seed's estimator); a group that spans domains
goes hierarchical (intra-domain, then across). Placement decides what spans: a collective
states how many of its ranks share a domain (an EP group of TP-8 ranks on 8-GPU nodes has one
per node), and the bytes bound for the others leave over the NIC. An all-gather or
reduce-scatter (a gathering dispatcher's) runs as a ring. A point-to-point send (a prompt's KV
cache to a decode pool) crosses the scale-out network. The α-β laws are in
`stepwall.core.laws`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import sympy as sp

from stepwall.core.fields import FACTOR, KindSpec, flag, quantity
from stepwall.core.laws import (
    all_to_all,
    cheapest_allreduce,
    hierarchical_all_to_all,
    hierarchical_allreduce,
    point_to_point,
    ring_allgather,
    switch_allreduce,
)
from stepwall.core.primitives import Primitive
from stepwall.core.scenario import Scenario
from stepwall.core.terms import (
    SCALE_UP_KINDS,
    Collective,
    Constraint,
    Decoding,
    Engine,
    Layout,
    Term,
    Workload,
)
from stepwall.core.units import DIMENSIONLESS, INFORMATION
from stepwall.plugin.hookspecs import hookimpl

PLUGIN = "interconnect"
NO_ENGINE = Engine()  # a primitive's law: the domain's own algorithms, no engine's override


def _time(doc: str, latex: str) -> Any:
    return quantity("time", doc, latex=latex, minimum=0.0, inclusive=True)


@attrs.frozen
class ScaleUp:
    domain_size: int = quantity(
        "dimensionless", "GPUs in one scale-up (NVLink/PCIe) domain", latex="D", integer=True
    )
    bus_bandwidth: float = quantity(
        "bandwidth",
        "all-reduce bus bandwidth per GPU at the message sizes of decode",
        latex=r"\beta_{bus}",
    )
    link_bandwidth: float = quantity(
        "bandwidth", "per-GPU one-direction link bandwidth (peak)", latex=r"\beta_{link}"
    )
    hop_latency: float = _time("latency per ring/tree step", r"\alpha_{hop}")
    switch_latency: float = _time("latency of an in-switch (NVLS) all-reduce", r"\alpha_{nvls}")
    a2a_latency: float = _time("fixed latency of one all-to-all call", r"\alpha_{a2a}")
    a2a_peer_latency: float = _time("added all-to-all latency per peer", r"\alpha_{peer}")
    in_switch_reduce: bool = flag("the switch reduces in-network (NVLS / SHARP)")
    oneshot_latency: float | None = quantity(
        "time",
        "fixed latency of a one-shot all-reduce, the custom kernel engines run at small sizes "
        "(each GPU reads every peer's buffer and reduces locally; default: no such kernel)",
        latex=r"\alpha_{1}",
        minimum=0.0,
        inclusive=True,
        default=None,
    )
    oneshot_bandwidth: float | None = quantity(
        "bandwidth",
        "rate at which a one-shot all-reduce reads its N−1 peers' buffers into each GPU "
        "(at most link_bandwidth)",
        latex=r"\beta_{1}",
        default=None,
    )
    a2a_bandwidth: float | None = quantity(
        "bandwidth",
        "rate at which the expert dispatch and combine kernels move a GPU's off-GPU bytes "
        "inside the domain (at most link_bandwidth, its default)",
        latex=r"\beta_{a2a}",
        default=None,
    )


def domain_allreduce(scenario: Scenario, engine: Engine, n: Any, size: Any) -> Any:
    """An all-reduce of ``size`` bytes per GPU over ``n`` GPUs of one domain: the engine's own
    law where it states one (`Engine.allreduce`), else the cheapest of the domain's
    algorithms, its one-shot kernel among them where stated."""
    if engine.allreduce is not None:
        return switch_allreduce(n, size, *engine.allreduce)
    up = scenario.params.cluster.scale_up
    switch = up.switch_latency if scenario.section("cluster.scale_up").in_switch_reduce else None
    return cheapest_allreduce(n, size, up.hop_latency, up.bus_bandwidth, switch,
                              *oneshot(scenario))  # fmt: skip


def oneshot(scenario: Scenario) -> tuple[Any, Any]:
    """The domain's one-shot all-reduce kernel (α₁, β₁) where its spec states both, else
    (None, None): the law then picks among ring, tree and in-switch alone. One without the
    other is an error."""
    if not scenario.stated_pair("cluster.scale_up", "oneshot_latency", "oneshot_bandwidth",
                                "a one-shot all-reduce kernel",
                                'both, e.g. oneshot_latency = "5 us", oneshot_bandwidth = '
                                '"530 GB/s"'):  # fmt: skip
        return None, None
    up = scenario.params.cluster.scale_up
    return up.oneshot_latency, up.oneshot_bandwidth


def a2a_rate(scenario: Scenario) -> Any:
    """The rate of the domain's dispatch and combine kernels: ``a2a_bandwidth`` where the spec
    states it (fitted to the kernels' tables), else the link's peak."""
    up = scenario.params.cluster.scale_up
    stated = scenario.section("cluster.scale_up").a2a_bandwidth is not None
    return up.a2a_bandwidth if stated else up.link_bandwidth


@attrs.frozen
class ScaleOut:
    nic_bandwidth: float = quantity(
        "bandwidth", "scale-out bandwidth per GPU (its NIC)", latex=r"\beta_{nic}"
    )
    latency: float = _time("latency per algorithm step across nodes", r"\alpha_{net}")
    oversubscription: float = quantity(
        "dimensionless",
        "fabric oversubscription (1 = non-blocking)",
        latex=r"o_{net}",
        minimum=1.0,
        inclusive=True,
        default=1.0,
        plausible=("1", FACTOR[1]),
    )


@attrs.frozen
class NoScaleOut:
    pass


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    domain = {"scale_up_domain": "domain_size"}
    return [
        KindSpec("cluster.scale_up", "nvlink", ScaleUp, "NVLink/NVSwitch domain", provides=domain),
        KindSpec(
            "cluster.scale_up",
            "pcie",
            ScaleUp,
            "GPUs on a PCIe switch, no in-switch reduction",
            provides=domain,
        ),
        KindSpec(
            "cluster.scale_up",
            "infinity-fabric",
            ScaleUp,
            "AMD Infinity Fabric (xGMI): a full mesh of links, no switch, so no in-network "
            "reduction; link_bandwidth is the sum over a GPU's links to its peers",
            provides=domain,
        ),
        KindSpec("cluster.scale_out", "infiniband", ScaleOut, "InfiniBand or RoCE, a NIC per GPU"),
        KindSpec(
            "cluster.scale_out", "none", NoScaleOut, "a single domain, nothing across", default=True
        ),
    ]


@hookimpl
def stepwall_collective_terms(
    scenario: Scenario, collectives: tuple[Collective, ...], engine: Engine
) -> list[Term]:
    up = scenario.params.cluster.scale_up
    has_out = scenario.kinds.get("cluster.scale_out", "none") == "infiniband"
    net = scenario.params.cluster.scale_out if has_out else None
    nic = net.nic_bandwidth / net.oversubscription if net is not None else None
    terms = []
    for c in collectives:
        if c.op == "send":
            if net is not None:
                per_call = point_to_point(c.size, net.latency, nic)
            else:
                per_call = point_to_point(c.size, up.a2a_latency, up.link_bandwidth)
            terms.append(Term(c.name, c.count * per_call, PLUGIN, c.why, "comm", c.overlap))
            continue
        # ranks of the group inside one domain: as stated by the layout, else as many as fit
        inside = c.inside if c.inside != 0 else sp.Min(c.group, up.domain_size, evaluate=False)
        gathers = c.op in ("all_gather", "reduce_scatter")
        if c.op == "all_reduce":
            within = domain_allreduce(scenario, engine, c.group, c.size)
        elif gathers:
            within = ring_allgather(c.group, c.size, up.hop_latency, up.bus_bandwidth)
        else:
            within = all_to_all(
                c.group, c.size, up.a2a_latency, up.a2a_peer_latency, a2a_rate(scenario), c.reach
            )
        if net is None:  # one domain only; stepwall_constraints keeps the group inside it
            per_call = sp.Piecewise((0, c.group <= 1), (within, True))
        else:
            if c.op == "all_reduce":
                whole = domain_allreduce(scenario, engine, up.domain_size, c.size)
                spans = hierarchical_allreduce(c.group, c.size, up.domain_size, whole,
                                               net.latency, nic)  # fmt: skip
            elif gathers:  # a ring over all the ranks, each step as slow as a NIC
                spans = ring_allgather(c.group, c.size, net.latency, nic)
            else:
                spans = hierarchical_all_to_all(
                    c.group, c.size, inside, up.a2a_latency, up.a2a_peer_latency,
                    a2a_rate(scenario), net.latency, nic, c.reach, c.across,
                )  # fmt: skip
            per_call = sp.Piecewise((0, c.group <= 1), (within, c.group <= inside), (spans, True))
        terms.append(Term(c.name, c.count * per_call, PLUGIN, c.why, "comm", c.overlap))
    return terms


# the rates a domain's kernels reach, each bounded by the peak of the links they cross:
# a GPU's all-to-all bytes leave it, and a one-shot all-reduce's N−1 peer buffers enter it,
# through its own links
KERNEL_RATES = {
    "a2a_bandwidth": "the expert dispatch and combine kernels move a GPU's bytes",
    "oneshot_bandwidth": "a one-shot all-reduce reads its peers' buffers",
}


def _within_link(scenario: Scenario) -> list[Constraint]:
    """Each kernel rate the domain states is at most its link bandwidth (`KERNEL_RATES`)."""
    up, stated = scenario.params.cluster.scale_up, scenario.section("cluster.scale_up")
    return [Constraint(f"{field}_within_link", getattr(up, field) <= up.link_bandwidth,
                       f"{what} at most at the peak of its links",
                       (f"cluster.scale_up.{field}", "cluster.scale_up.link_bandwidth"), PLUGIN)
            for field, what in KERNEL_RATES.items()
            if getattr(stated, field) is not None]  # fmt: skip


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    """A domain lies inside the cluster and holds whole nodes; its kernels move bytes at most
    at its links' peak; without a scale-out network no collective may span more than one
    domain."""
    if scenario.kinds["cluster.scale_up"] not in SCALE_UP_KINDS:
        return []
    up, cl = scenario.params.cluster.scale_up, scenario.params.cluster
    out = [
        *_within_link(scenario),
        Constraint(
            "domain_within_cluster",
            up.domain_size <= cl.nodes * cl.gpus_per_node,
            "a scale-up domain cannot hold more GPUs than the cluster has",
            ("cluster.scale_up.domain_size", "cluster.nodes", "cluster.gpus_per_node"),
            PLUGIN,
        ),
        Constraint(
            "domain_holds_whole_nodes",
            sp.Eq(sp.Mod(up.domain_size, cl.gpus_per_node), 0),
            "a node's GPUs share one scale-up domain, so a domain holds whole nodes",
            ("cluster.scale_up.domain_size", "cluster.gpus_per_node"),
            PLUGIN,
        ),
    ]
    if scenario.kinds.get("cluster.scale_out", "none") == "none":
        for c in workload.collectives:
            if c.op == "send":
                continue
            out.append(
                Constraint(
                    f"{c.name}_within_domain",
                    c.group <= up.domain_size,
                    f"{c.name} cannot span domains: the cluster has no scale-out network "
                    "(expected cluster.scale_out.kind = infiniband)",
                    ("cluster.scale_out.kind", "cluster.scale_up.domain_size"),
                    PLUGIN,
                )
            )
    return out


# ---------------------------------------------------------------- primitives (calibration)


def _allreduce(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """An all-reduce of ``bytes`` per GPU over ``gpus`` GPUs of one domain: the cheapest of
    ring, tree, in-switch and one-shot, as the model prices ``comm.tp_allreduce`` for an
    engine that states no law of its own."""
    return domain_allreduce(scenario, NO_ENGINE, x["gpus"], x["bytes"])


def _alltoall(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """An all-to-all (expert dispatch or combine) sending ``bytes`` per GPU among ``gpus``
    GPUs of one domain, as the model prices ``comm.ep_dispatch``."""
    up = scenario.params.cluster.scale_up
    return all_to_all(x["gpus"], x["bytes"], up.a2a_latency, up.a2a_peer_latency,
                      a2a_rate(scenario))  # fmt: skip


def _within_domain(scenario: Scenario, x: Mapping[str, float]) -> tuple[str, str, str] | None:
    """A collective among 2 to domain_size GPUs: one GPU communicates nothing, and more than
    a domain holds do not share one."""
    size = scenario.section("cluster.scale_up").domain_size
    if 2 <= x["gpus"] <= size:
        return None
    return "gpus", f"{x['gpus']:g} GPUs", f"2 to cluster.scale_up.domain_size = {size:g} GPUs"


@hookimpl
def stepwall_primitives() -> list[Primitive]:
    sizes = {"bytes": INFORMATION, "gpus": DIMENSIONLESS}
    return [
        Primitive("all_reduce", "cluster.scale_up", "an all-reduce inside one scale-up domain "
                  "(nccl-tests, custom one-shot kernels)", sizes, {},
                  ("hop_latency", "switch_latency", "bus_bandwidth", "oneshot_latency",
                   "oneshot_bandwidth"), _allreduce, PLUGIN,
                  _within_domain),
        Primitive("all_to_all", "cluster.scale_up", "expert dispatch or combine inside one "
                  "domain (DeepEP, TensorRT-LLM all-to-all): bytes sent per GPU", sizes, {},
                  ("a2a_latency", "a2a_peer_latency", "a2a_bandwidth", "link_bandwidth"),
                  _alltoall, PLUGIN, _within_domain),
    ]  # fmt: skip
