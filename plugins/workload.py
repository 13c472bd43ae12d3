"""Sections every scenario has: the workload served and the cluster it runs on."""

from __future__ import annotations

import attrs

from stepwall.fields import KindSpec, quantity
from stepwall.hookspecs import hookimpl


@attrs.frozen
class WorkloadSpec:
    concurrency: int = quantity(
        "dimensionless", "users decoding at once per replica (C)", latex="C", integer=True
    )
    context: float = quantity(
        "dimensionless", "tokens of context each user attends to (S)", latex="S"
    )


@attrs.frozen
class ClusterSpec:
    nodes: int = quantity(
        "dimensionless", "nodes (or compute trays) in the cluster", latex="n_{nodes}", integer=True
    )
    gpus_per_node: int = quantity("dimensionless", "GPUs per node", latex="g_{node}", integer=True)


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec("workload", "decode", WorkloadSpec, "decode-phase load: users and context", True),
        KindSpec("cluster", "cluster", ClusterSpec, "nodes × GPUs per node; networks below", True),
    ]
