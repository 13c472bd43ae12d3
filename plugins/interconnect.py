"""Interconnects: a scale-up domain (``nvlink`` or ``pcie``) and a scale-out network
(``infiniband`` or ``none``). Collectives inside a domain pick the cheapest algorithm, as
NCCL's tuner would; a group that spans domains goes hierarchical (intra-domain, then across).

α-β laws (Thakur, Rabenseifner & Gropp 2005; NCCL docs), with S bytes per GPU, N GPUs,
bus bandwidth β (nccl-tests convention) and per-step latency α.
"""

from __future__ import annotations

import attrs
import sympy as sp

from stepwall.hookspecs import hookimpl
from stepwall.spec import KindSpec, Scenario, flag, quantity
from stepwall.terms import Collective, Constraint, Decoding, Layout, Term, Workload

PLUGIN = "interconnect"


def _time(doc: str, latex: str) -> object:
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
        "bandwidth", "per-GPU one-direction bandwidth for all-to-all", latex=r"\beta_{link}"
    )
    hop_latency: float = _time("latency per ring/tree step", r"\alpha_{hop}")
    switch_latency: float = _time("latency of an in-switch (NVLS) all-reduce", r"\alpha_{nvls}")
    a2a_latency: float = _time("fixed latency of one all-to-all call", r"\alpha_{a2a}")
    a2a_peer_latency: float = _time("added all-to-all latency per peer", r"\alpha_{peer}")
    in_switch_reduce: bool = flag("the switch reduces in-network (NVLS / SHARP)")


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
    )


@attrs.frozen
class NoScaleOut:
    pass


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec("cluster.scale_up", "nvlink", ScaleUp, "NVLink/NVSwitch domain"),
        KindSpec(
            "cluster.scale_up", "pcie", ScaleUp, "GPUs on a PCIe switch, no in-switch reduction"
        ),
        KindSpec("cluster.scale_out", "infiniband", ScaleOut, "InfiniBand or RoCE, a NIC per GPU"),
        KindSpec(
            "cluster.scale_out", "none", NoScaleOut, "a single domain, nothing across", default=True
        ),
    ]


def ring_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """Ring all-reduce: 2(N−1)·α + 2(N−1)/N · S/β."""
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta


def tree_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """Double-binary-tree all-reduce: 2·log2(N)·α + 2(N−1)/N · S/β."""
    return 2 * sp.log(n, 2) * alpha + 2 * (n - 1) / n * size / beta


def switch_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """In-switch (NVLS) all-reduce: one switch round trip α + 2(N−1)/N · S/β."""
    return alpha + 2 * (n - 1) / n * size / beta


def all_to_all(
    n: sp.Expr, size: sp.Expr, alpha: sp.Expr, alpha_peer: sp.Expr, beta: sp.Expr
) -> sp.Expr:
    """All-to-all: α + (N−1)·α_peer + (N−1)/N · S/β (S bytes sent per GPU)."""
    return alpha + (n - 1) * alpha_peer + (n - 1) / n * size / beta


def domain_allreduce(up: object, n: sp.Expr, size: sp.Expr, in_switch: bool) -> sp.Expr:
    """Cheapest of ring, tree and (where the switch reduces) in-switch, as NCCL's tuner picks."""
    options = [
        ring_allreduce(n, size, up.hop_latency, up.bus_bandwidth),
        tree_allreduce(n, size, up.hop_latency, up.bus_bandwidth),
    ]
    if in_switch:
        options.append(switch_allreduce(n, size, up.switch_latency, up.bus_bandwidth))
    return sp.Min(*options)


def hierarchical_allreduce(
    up: object, out: object, n: sp.Expr, size: sp.Expr, in_switch: bool
) -> sp.Expr:
    """All-reduce over N > D GPUs in ⌈N/D⌉ domains: reduce inside each domain, then all-reduce
    the 1/D shard each GPU owns across domains (cheaper of ring and tree), each GPU over its
    own NIC at β_nic / oversubscription."""
    d = sp.ceiling(n / up.domain_size)
    beta = out.nic_bandwidth / out.oversubscription
    shard = size / up.domain_size
    across = sp.Min(
        ring_allreduce(d, shard, out.latency, beta), tree_allreduce(d, shard, out.latency, beta)
    )
    return domain_allreduce(up, up.domain_size, size, in_switch) + across


def hierarchical_all_to_all(up: object, out: object, n: sp.Expr, size: sp.Expr) -> sp.Expr:
    """All-to-all over N > D GPUs: the (N−D)/N of each GPU's bytes bound for other domains
    leave over its NIC; the rest moves inside the domain."""
    inside = all_to_all(
        up.domain_size,
        size * up.domain_size / n,
        up.a2a_latency,
        up.a2a_peer_latency,
        up.link_bandwidth,
    )
    across = (
        out.latency + (n - up.domain_size) / n * size * out.oversubscription / out.nic_bandwidth
    )
    return inside + across


@hookimpl
def stepwall_collective_terms(
    scenario: Scenario, collectives: tuple[Collective, ...]
) -> list[Term] | None:
    if scenario.kinds["cluster.scale_up"] not in ("nvlink", "pcie"):
        return None
    up = scenario.params.cluster.scale_up
    has_out = scenario.kinds.get("cluster.scale_out", "none") == "infiniband"
    out = scenario.params.cluster.scale_out if has_out else None
    in_switch = scenario.section("cluster.scale_up").in_switch_reduce
    terms = []
    for c in collectives:
        if c.op == "all_reduce":
            inside = domain_allreduce(up, c.group, c.size, in_switch)
            spans = hierarchical_allreduce(up, out, c.group, c.size, in_switch) if out else None
        else:
            inside = all_to_all(
                c.group, c.size, up.a2a_latency, up.a2a_peer_latency, up.link_bandwidth
            )
            spans = hierarchical_all_to_all(up, out, c.group, c.size) if out else None
        if spans is None:  # one domain only; stepwall_constraints keeps the group inside it
            per_call = sp.Piecewise((0, c.group <= 1), (inside, True))
        else:
            per_call = sp.Piecewise(
                (0, c.group <= 1), (inside, c.group <= up.domain_size), (spans, True)
            )
        terms.append(Term(c.name, c.count * per_call, PLUGIN, c.why, "comm", c.overlap))
    return terms


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    """A domain lies inside the cluster and holds whole nodes; without a scale-out network no
    collective may span more than one domain."""
    if scenario.kinds["cluster.scale_up"] not in ("nvlink", "pcie"):
        return []
    up, cl = scenario.params.cluster.scale_up, scenario.params.cluster
    out = [
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
