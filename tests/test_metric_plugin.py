"""Adding a metric is one plugin declaration (``stepwall_metrics``): a throwaway plugin declares
one and it appears in eval's text and JSON, sweep's CSV columns, the explorer page and the
generated metrics reference; a wrong dimension or a built-in's name is refused."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

from stepwall.apps import reference
from stepwall.core.units import DIMENSIONLESS, TIME
from stepwall.io.breakdown import metric_lines
from stepwall.model.metrics import METRICS, declared
from stepwall.numeric.compiled import MetricInfo
from stepwall.plugin.entries import Metric
from stepwall.plugin.hookspecs import hookimpl
from stepwall.testing import PluginKit

SCENARIO = "k26-b300-tp8-ddtree"


def users_served(scenario: Any, metrics: dict[str, Any]) -> Any:
    return metrics["tokens_per_s"] / metrics["tokens_per_s_per_user"]


USERS = Metric("users_served", DIMENSIONLESS, "", "users served",
               "aggregate tokens/s over one user's tokens/s", expr=users_served)  # fmt: skip


class UsersPlugin:
    @hookimpl
    def stepwall_metrics(self) -> list[Metric]:
        return [USERS]


@pytest.fixture
def kit(stepwall_plugin: PluginKit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PluginKit:
    monkeypatch.setenv("STEPWALL_CACHE_DIR", str(tmp_path / "cache"))
    return stepwall_plugin(UsersPlugin())


def test_eval_json_and_text_show_the_plugin_metric(kit: PluginKit) -> None:
    code, out, err = kit.cli("eval", SCENARIO, "--json")
    assert code == 0, err
    doc = json.loads(out)
    [entry] = doc["plugin_metrics"]
    assert entry["name"] == "users_served" and entry["label"] == "users served"
    assert entry["plugin"] != "" and entry["unit"] == ""
    # the metric is what its expression says, at the scenario's point
    assert entry["value"] == pytest.approx(doc["tokens_per_s"] / doc["tokens_per_s_per_user"])
    code, text, err = kit.cli("eval", SCENARIO)
    assert code == 0, err
    [line] = [ln for ln in text.splitlines() if ln.startswith("users served")]
    assert re.fullmatch(r"users served {10}[0-9.e+]+   \(plugin .+\)", line), line
    assert float(line.split()[2]) == pytest.approx(entry["value"], rel=1e-3)


def test_builtin_eval_json_has_no_plugin_metrics_key(stepwall_plugin: PluginKit) -> None:
    code, out, _ = stepwall_plugin().cli("eval", SCENARIO, "--json")
    assert code == 0 and "plugin_metrics" not in json.loads(out)


def test_a_keyed_plugin_metric_takes_its_place_in_eval_json_and_its_line_in_text(
    stepwall_plugin: PluginKit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyed = attrs.evolve(USERS, key="served.users", place=30, whole=True,
                         line="served                {served.users} users")  # fmt: skip

    class Keyed:
        @hookimpl
        def stepwall_metrics(self) -> list[Metric]:
            return [keyed]

    monkeypatch.setenv("STEPWALL_CACHE_DIR", str(tmp_path / "cache"))
    kit = stepwall_plugin(Keyed())
    code, out, err = kit.cli("eval", SCENARIO, "--json")
    assert code == 0, err
    doc = json.loads(out)
    users = round(doc["tokens_per_s"] / doc["tokens_per_s_per_user"])
    assert doc["served"] == {"users": users} and isinstance(doc["served"]["users"], int)
    keys = list(doc)  # an object after the plain keys and the built-in memory object
    assert "plugin_metrics" not in doc
    assert keys[keys.index("groups") - 2 : keys.index("groups")] == ["memory", "served"]
    code, text, err = kit.cli("eval", SCENARIO)
    assert code == 0, err
    assert f"served                {users} users" in text.splitlines()
    assert not any(ln.startswith("users served") for ln in text.splitlines())


def test_a_line_template_reads_dotted_keys_and_its_own_format_specs() -> None:
    def info(name: str, key: str, line: str) -> MetricInfo:
        return MetricInfo(name, "", name, "", key, 0, False, True, None, line)

    doc = {"t": 0.0125, "box": {"b": 3.5e9, "ok": False}, "gone": None}
    lines = metric_lines(doc, [
        info("t", "t", "t {t:time}"),
        info("b", "box.b", "b {box.b:.2f/1e9} GB, {box.ok:fits|DOES NOT FIT}, {t:.2e}"),
        info("gone", "gone", "never {gone}"),  # unknown: no line
        info("quiet", "t", ""),  # no line declared
    ])  # fmt: skip
    assert lines == ["t 12.5 ms", "b 3.50 GB, DOES NOT FIT, 1.25e-02"]


@pytest.mark.parametrize("key", ["memory", "memory.extra", "terms", "gpus"])
def test_a_taken_eval_key_is_refused(stepwall_plugin: PluginKit, key: str) -> None:
    class Taken:
        @hookimpl
        def stepwall_metrics(self) -> list[Metric]:
            return [attrs.evolve(USERS, key=key)]

    code, _, err = stepwall_plugin(Taken()).cli("eval", SCENARIO, "--no-cache")
    assert code != 0
    assert f"metric 'users_served': eval's JSON has a key {key.partition('.')[0]!r}" in err


def test_sweep_csv_has_the_plugin_metric_column(kit: PluginKit) -> None:
    args = ["--metric", "users_served", "--metric", "tokens_per_s", "--format", "csv"]
    code, out, err = kit.cli("sweep", SCENARIO, "--vary", "workload.concurrency=1,2", *args)
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0][:3] == ["workload.concurrency", "users_served", "tokens_per_s [tokens/s]"]
    assert len(rows) == 3 and all(float(r[1]) > 0 for r in rows[1:])


def test_explorer_page_lists_the_plugin_metric(kit: PluginKit, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    code, _, err = kit.cli("explore", SCENARIO, "--free", "parallel.tp", "-o", str(page))
    assert code == 0, err
    html = page.read_text()
    assert '<option value="users_served">users served</option>' in html
    doc = json.loads(re.search(r'<script type="application/json" id="stepwall-data">(.*?)</script>',
                               html, flags=re.S)[1])  # fmt: skip
    # the built-in metrics the specs give, in their order, then the plugin's
    assert doc["metrics"] == [*(m for m in METRICS if m in doc["metrics"]), "users_served"]
    assert doc["labels"]["users_served"] == "users served"
    assert doc["help"]["users_served"] == "users_served: " + USERS.meaning


def test_generated_reference_lists_the_plugin_metric(kit: PluginKit) -> None:
    plugin = kit.registry.metrics["users_served"].plugin
    assert plugin
    text = reference.metrics_markdown(declared(kit.registry))
    rows = [r for r in text.splitlines() if r.startswith("| `users_served` |")]
    assert rows == [f"| `users_served` | 1 | dimensionless | {USERS.meaning} | larger |  | "
                    f"`{plugin}` |"]  # fmt: skip


def test_a_wrong_dimension_is_refused(stepwall_plugin: PluginKit) -> None:
    class Wrong:
        @hookimpl
        def stepwall_metrics(self) -> list[Metric]:
            return [Metric("users_served", TIME, "s", "users", "wrong", expr=users_served)]

    code, _, err = stepwall_plugin(Wrong()).cli("eval", SCENARIO, "--no-cache")
    assert code != 0
    assert "metric 'users_served' is dimensionless, declared s" in err


def test_a_builtin_name_is_refused(stepwall_plugin: PluginKit) -> None:
    class Clash:
        @hookimpl
        def stepwall_metrics(self) -> list[Metric]:
            return [Metric("gpus", DIMENSIONLESS, "", "GPUs", "again", expr=users_served)]

    code, _, err = stepwall_plugin(Clash()).cli("eval", SCENARIO, "--no-cache")
    assert code != 0 and "metric 'gpus' is a built-in metric" in err


def test_search_takes_the_plugin_metric_as_objective_target_and_filter(kit: PluginKit) -> None:
    base = ("search", "kimi-k2.6-int4", "--hardware", "b300", "--cluster", "hgx-b300-ib",
            "--gpus", "8", "--batch", "1,2,4,8", "--json", "-q")  # fmt: skip
    asked = ("--objective", "users_served", "--at", "users_served>=2", "--where", "users_served<=8")
    code, out, err = kit.cli(*base, *asked)
    assert code == 0, err
    doc = json.loads(out)
    served = [p["users_served"] for p in doc["frontier"]]
    assert served and max(served) <= 8  # the filter
    for p in doc["frontier"]:  # each point's value is its expression's
        assert p["users_served"] == pytest.approx(p["tokens_per_s"] / p["tokens_per_s_per_user"])
    [target] = doc["targets"]
    [best] = target["options"]
    assert target["objective"] == "users_served"
    # 8 GPUs at up to 8 users per rank can serve more than 8 users; the filter stops at 8
    assert best["point"]["users_served"] == pytest.approx(8.0)
    code, out, err = kit.cli(*base)
    assert code == 0, err
    assert max(p["users_served"] for p in json.loads(out)["frontier"]) > 8
    code, _, err = kit.cli(*base, "--objective", "users_serve")
    assert code == 2 and "did you mean 'users_served'?" in err
