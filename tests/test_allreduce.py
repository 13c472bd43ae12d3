"""The all-reduce inside a scale-up domain as engines run it (issue 22, item 8: a law that fits
its primitive table, its form changed where one law could not): below a few MiB TensorRT-LLM,
SGLang and vLLM run a one-shot custom kernel (each GPU reads every peer's buffer and reduces
locally: α₁ + (N−1)·S/β₁), above it two-shot and NCCL algorithms (ring, tree, in-switch).
Checked on its own terms: the model's all-reduce is the cheapest of those laws at the spec's
values, a domain without a one-shot kernel keeps the others, an engine's own law replaces them
(the seed's), a group spanning domains reduces inside each first, and the primitive that
`stepwall calibrate` fits is the model's law."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stepwall.apps.bands import calibration_intervals
from stepwall.apps.calibrate import build_problem, load_entry, read_data
from stepwall.cli import main
from stepwall.core.units import parse_quantity
from stepwall.model.compose import StepModel, build_model
from stepwall.plugin import registry

ROOT = Path(__file__).parents[1]
DECODE = ['workload.kind="decode"', "workload.context=2048", "parallel.tp=8"]


def _si(text: str) -> float:
    return parse_quantity(text)[0]


def _up(cluster: str) -> dict[str, float]:
    """The cluster spec's committed scale-up values, in SI (its in-switch latency only where
    the switch reduces)."""
    doc: dict[str, Any] = tomllib.loads((ROOT / f"specs/clusters/{cluster}.toml").read_text())
    up = doc["scale_up"]
    out = {k: _si(v) for k, v in up.items() if isinstance(v, str) and k != "kind"}
    if not up["in_switch_reduce"]:
        del out["switch_latency"]
    return out


def _engine(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = tomllib.loads((ROOT / f"specs/engines/{name}.toml").read_text())
    return doc


def _per_call(m: StepModel) -> tuple[float, float, float]:
    """(seconds per all-reduce, bytes per GPU, GPUs) of the model's tensor-parallel
    all-reduce."""
    c = next(c for c in m.workload.collectives if c.name == "comm.tp_allreduce")
    count, size, group = (float(m.substituted(x)) for x in (c.count, c.size, c.group))
    total = float(m.evaluate()["terms"]["comm.tp_allreduce"])
    return total / count, size, group


def _laws(up: dict[str, float], n: float, s: float) -> dict[str, float]:
    """Each algorithm's time from its definition (Thakur et al. 2005; the one-shot kernel)."""
    hop, bus = up["hop_latency"], up["bus_bandwidth"]
    out = {"ring": 2 * (n - 1) * hop + 2 * (n - 1) / n * s / bus,
           "tree": 2 * math.log2(n) * hop + 2 * (n - 1) / n * s / bus}  # fmt: skip
    if "switch_latency" in up:
        out["switch"] = up["switch_latency"] + 2 * (n - 1) / n * s / bus
    if "oneshot_latency" in up:
        out["oneshot"] = up["oneshot_latency"] + (n - 1) * s / up["oneshot_bandwidth"]
    return out


def _model(users: int, cluster: str = "hgx-b200-ib", engine: str = "trtllm") -> StepModel:
    return build_model(f"model=deepseek-v3-fp8,hardware=b200,cluster={cluster},engine={engine}",
                       [*DECODE, f"workload.concurrency={users}"])  # fmt: skip


@pytest.mark.parametrize(("users", "kind"), [(8, "oneshot"), (1024, "switch")])
def test_the_all_reduce_is_the_cheapest_law(users: int, kind: str) -> None:
    """TP-8 on HGX B200 with TensorRT-LLM: 8 users' hidden states (112 KiB) go one-shot,
    1024 users' (14 MiB) by the cheaper of the NCCL-side laws; either way the time is the
    minimum of the laws at the spec's values, and the named one is that minimum."""
    per_call, size, n = _per_call(_model(users))
    laws = _laws(_up("hgx-b200-ib"), n, size)
    assert per_call == pytest.approx(min(laws.values()), rel=1e-9)
    assert min(laws, key=laws.__getitem__) == kind


def test_one_shot_loses_to_two_shot_above_a_size() -> None:
    """The one-shot kernel moves N−1 buffers: past the size where its bytes outweigh the other
    laws' latency it is no longer the cheapest, and the model follows the crossing."""
    up = _up("hgx-b200-ib")
    small, large = _model(8), _model(1024)
    t_small, s_small, n = _per_call(small)
    t_large, s_large, _ = _per_call(large)
    assert t_small == pytest.approx(_laws(up, n, s_small)["oneshot"], rel=1e-9)
    assert t_large < _laws(up, n, s_large)["oneshot"]


def test_a_domain_without_a_one_shot_kernel_keeps_the_other_laws() -> None:
    """hgx-h800-ib states no one-shot kernel (no table measures one there): its all-reduce is
    the cheapest of ring, tree and in-switch alone."""
    per_call, size, n = _per_call(_model(8, cluster="hgx-h800-ib"))
    up = _up("hgx-h800-ib")
    assert "oneshot_latency" not in up
    assert per_call == pytest.approx(min(_laws(up, n, size).values()), rel=1e-9)


def test_an_engine_law_replaces_the_domain_laws() -> None:
    """The seed's estimator priced every NVLink all-reduce as a fixed latency plus the ring's
    bytes (BRIEF S11); its profile states that law for NVLink domains, which the model then
    uses there."""
    per_call, size, n = _per_call(_model(8, engine="seed-estimator"))
    seed = _engine("seed-estimator")["nvlink"]
    alpha, beta = _si(seed["allreduce_latency"]), _si(seed["allreduce_bandwidth"])
    assert per_call == pytest.approx(alpha + 2 * (n - 1) / n * size / beta, rel=1e-9)


def test_a_group_across_domains_reduces_inside_each_first() -> None:
    """TP-16 on two HGX B200 nodes: the whole message all-reduced inside each node (by the
    cheapest domain law, one-shot included), then each GPU's 1/8 shard across the two nodes
    over its NIC (the cheaper of ring and tree)."""
    m = build_model("model=deepseek-v3-fp8,hardware=b200,cluster=hgx-b200-ib,engine=trtllm",
                    ['workload.kind="decode"', "workload.context=2048", "parallel.tp=16",
                     "workload.concurrency=8", "cluster.nodes=2"])  # fmt: skip
    per_call, size, n = _per_call(m)
    doc = tomllib.loads((ROOT / "specs/clusters/hgx-b200-ib.toml").read_text())
    alpha, nic = _si(doc["scale_out"]["latency"]), _si(doc["scale_out"]["nic_bandwidth"])
    within = min(_laws(_up("hgx-b200-ib"), 8, size).values())
    piece, d = size / 8, n / 8
    across = min(2 * (d - 1) * alpha + 2 * (d - 1) / d * piece / nic,
                 2 * math.log2(d) * alpha + 2 * (d - 1) / d * piece / nic)  # fmt: skip
    assert per_call == pytest.approx(within + across, rel=1e-9)


def test_an_engine_law_for_one_fabric_leaves_the_others() -> None:
    """The seed's NVLink law does not reach a PCIe domain: there the cluster's own laws price
    the all-reduce."""
    m = build_model("model=deepseek-v3-fp8,hardware=rtx-pro-6000,cluster=pcie-rtx-pro-6000,"
                    "engine=seed-estimator",
                    ['workload.kind="decode"', "workload.context=2048", "parallel.tp=8",
                     "workload.concurrency=1", 'model.expert_bits="4 bit"'])  # fmt: skip
    per_call, size, n = _per_call(m)
    assert per_call == pytest.approx(min(_laws(_up("pcie-rtx-pro-6000"), n, size).values()),
                                     rel=1e-9)  # fmt: skip


@pytest.mark.parametrize("cluster", ["hgx-h100-ib", "hgx-h200-ib", "hgx-b200-ib",
                                     "hgx-b300-ib", "gb200-nvl72", "gb300-nvl72"])  # fmt: skip
def test_the_primitive_is_the_model_law(cluster: str) -> None:
    """Every row of the shipped TensorRT-LLM table, priced by the all_reduce primitive that
    `stepwall calibrate` fits, is the cheapest law at the cluster's values."""
    reg = registry.build(autoload=False)
    manifest = tomllib.loads((ROOT / f"specs/calibration/{cluster}.toml").read_text())
    entry = load_entry(cluster, reg.kinds)
    table = read_data(ROOT / "specs/calibration" / manifest["data"][0], reg.primitives,
                      entry.section)  # fmt: skip
    prob = build_problem(entry, [table], reg.primitives)
    up = _up(cluster)
    for row, law in zip(prob.rows, prob.model(prob.values), strict=True):
        want = min(_laws(up, row.numbers["gpus"], row.numbers["bytes"]).values())
        assert law == pytest.approx(want, rel=1e-9)


def test_the_calibration_bands_the_cluster_values() -> None:
    """A cluster manifest's 95% intervals band the predictions that read its values, as a
    GPU manifest's do: keyed by the cluster spec file, as cluster.* paths."""
    found = calibration_intervals()
    spec = (ROOT / "specs/clusters/hgx-b200-ib.toml").resolve()
    paths = set(found[spec])
    assert {"cluster.scale_up.oneshot_latency", "cluster.scale_up.oneshot_bandwidth"} <= paths
    iv = found[spec]["cluster.scale_up.oneshot_latency"]
    assert iv.low < _up("hgx-b200-ib")["oneshot_latency"] < iv.high


@pytest.mark.parametrize(("section", "key", "missing"), [
    ("[engine]\nfrom = \"sglang\"\n\n[engine.nvlink]\n", 'allreduce_latency = "4 us"',
     "engine.nvlink.allreduce_bandwidth"),
    ("[cluster]\nfrom = \"mi300x-8\"\n\n[cluster.scale_up]\n", 'oneshot_latency = "5 us"',
     "cluster.scale_up.oneshot_bandwidth"),
])  # fmt: skip
def test_half_a_law_is_refused(section: str, key: str, missing: str, capsys: Any,
                               tmp_path: Path) -> None:  # fmt: skip
    """A latency without its bandwidth is refused in one line naming the missing key, exit 2."""
    own = tmp_path / "half.toml"
    own.write_text(f'from = "{ROOT / "specs/scenarios/dsr1-fp8-mi300x-tp8-serving.toml"}"\n'
                   f'name = "half"\n\n{section}{key}\n')  # fmt: skip
    code = main(["eval", str(own)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and missing in err
