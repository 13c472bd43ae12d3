"""Requirements instead of plugin field names (issue 21): what the composer needs from a
section (device memory, the cluster's size, power, price) is a declared requirement; a kind
says which of its fields provides it, and building the registry checks that it does. A
throwaway hardware kind that calls its capacity ``hbm_size`` is priced like the built-in GPU;
a cluster kind that counts its nodes as ``machines`` is sized by it in hints, derivations
and search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from stepwall.analyses.common import key_range, metric_expr
from stepwall.core.errors import PluginError, SpecError
from stepwall.core.fields import KindSpec, quantity
from stepwall.model.compose import _cluster_gpus
from stepwall.plugin import registry as registries
from stepwall.plugin.hookspecs import hookimpl
from stepwall.plugin.requirements import REQUIREMENTS
from stepwall.plugins import gpu
from stepwall.testing import PluginKit, evaluate, model

ROOT = Path(__file__).resolve().parents[1]
BASE = "k26-b300-tp8-ddtree"


def _renamed_fields(capacity: Any) -> type:
    """The built-in GPU's fields with ``memory_capacity`` replaced by ``hbm_size``."""
    fields = {f.name: attrs.field(default=f.default, metadata=dict(f.metadata), kw_only=True)
              for f in attrs.fields(gpu.Gpu) if f.name != "memory_capacity"}  # fmt: skip
    return attrs.make_class("Renamed", {"hbm_size": capacity, **fields}, frozen=True)


class RenamedGpu:
    """A third-party hardware kind ``gpu-renamed``: its device memory is ``hbm_size``."""

    def __init__(self, provides: dict[str, str], capacity: Any = None) -> None:
        self.provides = provides
        self.fields = _renamed_fields(capacity or quantity("information", "device memory"))

    @hookimpl
    def stepwall_spec_kinds(self) -> list[KindSpec]:
        return [KindSpec("hardware", "gpu-renamed", self.fields, "renamed", provides=self.provides)]

    @hookimpl
    def stepwall_compute_terms(self, scenario: Any, ops: Any, engine: Any, op_kinds: Any) -> Any:
        return gpu.stepwall_compute_terms(scenario, ops, engine, op_kinds)


GOOD = {"device_memory": "hbm_size", "board_power": "board_power"}


@pytest.fixture
def renamed_scenario(tmp_path: Path) -> Path:
    """BASE with its hardware file copied, of kind gpu-renamed, capacity as ``hbm_size``."""
    (tmp_path / "hardware").mkdir()
    for name in ("b200", "b300"):  # b300 starts from b200
        text = (ROOT / f"specs/hardware/{name}.toml").read_text()
        assert text.count("\nmemory_capacity = ") == 2  # the value and its source
        text = text.replace("\nmemory_capacity = ", "\nhbm_size = ")
        text = text.replace('from = "b200"\n', 'kind = "gpu-renamed"\nfrom = "b200r.toml"\n')
        (tmp_path / f"hardware/{name}r.toml").write_text(text)
    assert 'kind = "gpu-renamed"' in (tmp_path / "hardware/b300r.toml").read_text()
    scenario = (ROOT / f"specs/scenarios/{BASE}.toml").read_text()
    assert scenario.count('hardware = "b300"\n') == 1
    scenario = scenario.replace('hardware = "b300"\n', 'hardware = "hardware/b300r.toml"\n')
    (tmp_path / "scenario.toml").write_text(scenario)
    return tmp_path / "scenario.toml"


def _drop_names(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("scenario", "parameters", "overrides")}


def test_a_kind_that_names_its_capacity_otherwise_is_priced_alike(renamed_scenario: Path) -> None:
    renamed = evaluate(renamed_scenario, plugins=[RenamedGpu(GOOD)])
    builtin = evaluate(BASE)
    assert renamed["feasible"] and _drop_names(renamed) == _drop_names(builtin)
    assert renamed["memory"] == builtin["memory"] and renamed["joules_per_token"] is not None


def test_memory_that_does_not_fit_names_the_kinds_own_field(renamed_scenario: Path) -> None:
    doc = evaluate(renamed_scenario, plugins=[RenamedGpu(GOOD)], sets=["hardware.hbm_size=10 GB"])
    (memory,) = [v for v in doc["violations"] if v["constraint"] == "memory_fits"]
    assert memory["keys"][-1] == "hardware.hbm_size"
    assert memory["message"].startswith("--set:hardware.hbm_size: resident memory per GPU ")


def test_an_optional_requirement_left_out_leaves_its_metric_unknown(
    renamed_scenario: Path,
) -> None:
    price = ["cluster.price_per_gpu_hour=2 USD/h"]
    plugin = RenamedGpu({"device_memory": "hbm_size"})
    doc = evaluate(renamed_scenario, plugins=[plugin], sets=price)
    assert doc["joules_per_token"] is None and doc["tokens_per_s_per_mw"] is None
    # the cluster's price, not the GPU's: 2 USD/h over 3600 s, per tokens/s per GPU, × 10⁶
    expected = 2 / 3600 / doc["tokens_per_s_per_gpu"] * 1e6
    assert doc["usd_per_million_tokens"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("provides", "capacity", "fragment"),
    [
        ({}, None, "kind 'gpu-renamed' of section 'hardware' does not say which field "
                   "provides 'device_memory'"),
        ({**GOOD, "device_memory": "memory_capacity"}, None,
         "provides 'device_memory' by field 'memory_capacity', which is no information field"),
        (GOOD, quantity("bandwidth", "not a size"),
         "provides 'device_memory' by field 'hbm_size', which is no information field"),
        ({**GOOD, "nodes": "hbm_size"}, None,
         "provides 'nodes', which is no requirement of the section (expected one of: "
         "device_memory, board_power)"),
    ],
)  # fmt: skip
def test_a_kind_that_does_not_provide_what_its_section_must(
    provides: dict[str, str], capacity: Any, fragment: str
) -> None:
    with pytest.raises(PluginError) as caught:
        registries.build(extra=[RenamedGpu(provides, capacity)], autoload=False, disable=())
    message = str(caught.value)
    assert message.startswith("plugin ") and fragment in message, message


def test_the_builtins_provide_every_requirement() -> None:
    kinds = registries.build(autoload=False, disable=()).kinds
    for name, want in REQUIREMENTS.items():
        providers = [s for (section, _), s in kinds.items() if section == want.section]
        assert providers and all(name in s.provides for s in providers), name


@attrs.frozen
class _More:
    machines: int = quantity("dimensionless", "nodes, as this kind counts them", integer=True)
    hourly: float | None = quantity("price_rate", "what one GPU-hour costs", default=None)


class MoreCluster:
    """A cluster kind ``cluster-more`` (the built-in's fields, extended) whose nodes are
    ``machines`` and whose price is ``hourly``: the core must read those, not ``nodes``."""

    @hookimpl
    def stepwall_spec_kinds(self) -> list[KindSpec]:
        provides = {"nodes": "machines", "price_per_gpu_hour": "hourly"}
        return [KindSpec("cluster", "cluster-more", _More, "more", extends=("cluster", "cluster"),
                         provides=provides)]  # fmt: skip


MORE = ["cluster.kind=cluster-more", "cluster.machines=16"]  # hgx-b300-ib: nodes = 9, 8 per node


def test_the_core_reads_a_cluster_kinds_own_fields() -> None:
    m = model(BASE, [MoreCluster()], MORE)
    assert m.provides["nodes"] == "cluster.machines"
    assert m.provides["price_per_gpu_hour"] == "cluster.hourly"
    assert _cluster_gpus(m, m.values) == 16 * 8  # the repair hints' scan limit
    # a parallel degree is scanned up to 4 × the cluster's GPUs: 4 · 16 · 8 (not 4 · 9 · 8)
    assert key_range(m, m.parameter("parallel.tp")) == (1.0, 512.0)
    with pytest.raises(SpecError) as caught:
        metric_expr(m, "usd_per_million_tokens")
    assert caught.value.key == "cluster.hourly"
    assert "--set cluster.hourly=" in str(caught.value)


def test_search_sizes_a_cluster_by_its_kinds_own_field(tmp_path: Path) -> None:
    text = (ROOT / "specs/clusters/hgx-b300-ib.toml").read_text()
    assert text.count("\nnodes = 9\n") == 1
    for machines in (1, 9):
        more = f'\nkind = "cluster-more"\nmachines = {machines}\nnodes = 9\n'
        (tmp_path / f"more{machines}.toml").write_text(text.replace("\nnodes = 9\n", more))
    kit = PluginKit()(MoreCluster())
    common = ("search", "kimi-k2.6-int4", "--hardware", "b300", "--batch", "1", "--json", "-q")
    one = kit.cli(*common, "--cluster", str(tmp_path / "more1.toml"))  # 8 GPUs, not 9 nodes' 72
    given = kit.cli(*common, "--cluster", str(tmp_path / "more9.toml"), "--gpus", "8")
    assert one[0] == given[0] == 0, (one[2], given[2])
    doc, want = json.loads(one[1]), json.loads(given[1])
    assert {p["gpus"] for p in doc["frontier"]} == {8}
    assert doc["evaluated"] == want["evaluated"] > 0
    # the search sets the kind's own field for each layout (so --set may not)
    assert all("--set cluster.machines=1 " in p["command"] for p in doc["frontier"])
    code, _, err = kit.cli(*common, "--cluster", str(tmp_path / "more1.toml"),
                           "--set", "cluster.machines=2")  # fmt: skip
    assert code == 2 and "search:--set: cluster.machines is searched" in err
