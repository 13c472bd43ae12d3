"""Validity is part of the model: constraints stated by plugins, checked at a point, over a
grid and along a key; a misbehaving plugin is named with its hook."""

from __future__ import annotations

import pickle
import tomllib
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from stepwall.analyses.optimum import optimum
from stepwall.core.errors import DimensionError, PluginError, SpecError
from stepwall.core.terms import Constraint, Term
from stepwall.core.units import format_quantity, parse_quantity
from stepwall.model.compose import build_model
from stepwall.plugin.hookspecs import hookimpl

BASE = "k26-b300-tp8-ddtree"


def test_every_shipped_scenario_states_its_constraints() -> None:
    m = build_model(BASE)
    names = {c.name for c in m.constraints}
    for name in (
        "dense_layers_within_layers",
        "top_k_within_experts",
        "accepted_within_verified",
        "domain_within_cluster",
        "layout_fits_cluster",
        "heads_by_tp",
        "experts_by_ep",
        "memory_fits",
        "moe.routed_experts_nonnegative",
    ):
        assert name in names, name
    assert not m.violations()


def test_violation_names_the_file_and_key_and_the_relation(tmp_path) -> None:
    model_file = tmp_path / "my-model.toml"
    model_file.write_text('from = "kimi-k2.6-int4"\nn_dense_layers = 100\n')
    sc = tmp_path / "sc.toml"
    sc.write_text(f'from = "{BASE}"\nmodel = "./my-model.toml"\n')
    m = build_model(sc)
    with pytest.raises(SpecError) as e:
        m.check()
    text = str(e.value)
    assert text.startswith(f"{model_file}:model.n_dense_layers: 100 > model.n_layers = 61")
    assert "(dense layers are a subset of the layers" in text


def test_memory_violation_says_resident_usable_and_the_degree_that_fits() -> None:
    m = build_model("dsv3-h200-tp8", ["parallel.tp=1"])
    # usable = the GPU's capacity × the engine's memory fraction, from the spec files
    specs = Path(__file__).resolve().parents[1] / "specs"
    gpu = tomllib.loads((specs / "hardware" / "h200.toml").read_text())
    engine = tomllib.loads((specs / "engines" / "trtllm.toml").read_text())
    capacity, dim = parse_quantity(gpu["memory_capacity"])
    # TensorRT-LLM's fraction is of the memory the weights leave free: none here, so the
    # weights may use all of it and the KV cache nothing
    assert engine["memory_of_free"] is True
    usable = format_quantity(capacity, dim)
    with pytest.raises(
        SpecError, match=rf"resident memory per GPU 709.8 GB > usable {usable}"
    ) as e:
        m.check()
    assert "parallel.tp = 8 satisfies every constraint" in str(e.value)


def test_deepseek_h200_optimum_per_gpu_fits() -> None:
    """The issue's case: at 64 users per GPU, TP-1 looked best but needs 710 GB of 140."""
    m = build_model("dsv3-h200-tp8", ["parallel.tp=1"])
    d = optimum(m, "parallel.tp", metric="tokens_per_s_per_gpu")
    assert d.feasible_value == 8
    at = build_model("dsv3-h200-tp8", [f"parallel.tp={d.feasible_value}"])
    ev = at.evaluate()
    assert bool(ev["feasible"]) and ev["memory_bytes_per_gpu"] <= ev["memory_capacity_per_gpu"]
    # the engine's usable memory (TensorRT-LLM: 0.90 of it) leaves TP-8 the only degree
    # that fits, and the note names the constraint that sets it
    assert "memory_fits" in d.note


def test_allow_infeasible_evaluates_and_marks(capsys) -> None:
    from stepwall.cli import main

    assert main(["eval", BASE, "--set", "parallel.tp=3", "--allow-infeasible", "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] is False
    assert doc["violations"][0]["constraint"] == "heads_by_tp"
    assert main(["eval", BASE, "--set", "parallel.tp=3", "--allow-infeasible"]) == 0
    assert "INFEASIBLE" in capsys.readouterr().out


def test_uneven_splits_are_an_explicit_choice() -> None:
    assert build_model(BASE, ["parallel.tp=72"]).violations()
    assert not build_model(BASE, ["parallel.tp=72", "parallel.uneven=true"]).violations()


def test_feasible_mask_equals_pointwise_check() -> None:
    """The compiled constraints agree with a fresh build at every point of a grid."""
    m = build_model(BASE)
    tp = np.arange(1.0, 20.0)
    ev = m.evaluate({"parallel.tp": tp})
    for t, ok in zip(tp, ev["feasible"], strict=True):
        assert bool(ok) == (not build_model(BASE, [f"parallel.tp={int(t)}"]).violations())


def test_derive_region_names_the_bounding_constraint() -> None:
    m = build_model("k26-gb300nvl72-tp72-ddtree")
    d = optimum(m, "parallel.tp")
    assert d.value == 72 and "layout_fits_cluster" in d.note


def test_structural_keys_are_refused_by_derive() -> None:
    m = build_model(BASE)
    assert "model.n_experts" in m.structural_keys
    with pytest.raises(SpecError, match="decides which terms"):
        optimum(m, "model.n_experts")


# ---------------------------------------------------------------- plugins that misbehave


class _Plugin:
    def __init__(self, name: str, result: object, hook: str = "fixed") -> None:
        self.__name__ = name
        self.result = result

    @hookimpl
    def stepwall_fixed_terms(self, scenario, workload, decoding):
        r = self.result
        return r(scenario) if callable(r) else r


@pytest.mark.parametrize(
    ("result", "needle"),
    [
        (["a string"], "stepwall_fixed_terms returned a list holding str where each item"),
        (lambda sc: Term("t", sc.params.engine.per_step, "p", "why"), "returned Term where"),
        ("text", "returned str where a list of Term"),
        (42, "returned int where a list of Term"),
    ],
)
def test_a_bad_return_names_the_plugin_and_the_hook(result, needle, stepwall_plugin) -> None:
    kit = stepwall_plugin(_Plugin("bad_one", result))
    with pytest.raises(PluginError, match=r"plugin bad_one: stepwall_fixed_terms") as e:
        kit.model(BASE)
    assert needle in str(e.value)


def test_a_duplicate_term_name_names_both_plugins(stepwall_plugin) -> None:
    dup = _Plugin("dup", lambda sc: [Term("engine.per_step", sc.params.engine.per_step,
                                           "dup", "again")])  # fmt: skip
    with pytest.raises(PluginError, match=r"plugin dup and plugin engine: two terms"):
        stepwall_plugin(dup).model(BASE)


@pytest.mark.parametrize("bad", [sp.nan, sp.oo, sp.zoo])
def test_a_term_that_is_not_finite_names_the_plugin(bad) -> None:
    with pytest.raises(DimensionError, match=r"plugin p: term t: a term is not finite"):
        Term("t", bad, "p", "why")


def test_a_negative_term_is_refused_naming_the_plugin(stepwall_plugin) -> None:
    neg = _Plugin("negative", lambda sc: [Term("neg", -sc.params.engine.per_step, "negative",
                                               "a negative time")])  # fmt: skip
    m = stepwall_plugin(neg).model(BASE)
    with pytest.raises(SpecError, match=r"plugin negative: term neg = -1 ms < 0"):
        m.check()


def test_a_constraint_must_be_a_relation_of_one_dimension() -> None:
    m = build_model(BASE)
    hw = m.scenario.params.hardware
    with pytest.raises(DimensionError, match="plugin p: term c"):
        Constraint("c", hw.hbm_bandwidth <= hw.memory_capacity, "why", (), "p")
    with pytest.raises(DimensionError, match="must be a sympy relation"):
        Constraint("c", hw.hbm_bandwidth, "why", (), "p")  # type: ignore[arg-type]


def test_a_plugin_constraint_joins_every_command(stepwall_plugin) -> None:
    class Cap:
        __name__ = "cap"

        @hookimpl
        def stepwall_constraints(self, scenario, decoding, layout, workload):
            p = scenario.params.workload
            return [Constraint("few_users", p.concurrency <= 4, "a small box serves at most 4",
                               ("workload.concurrency",), "cap")]  # fmt: skip

    kit = stepwall_plugin(Cap())
    with pytest.raises(SpecError, match=r"workload.concurrency: 8 > 4 \(a small box"):
        kit.model(BASE, ["workload.concurrency=8"]).check()
    m = kit.model(BASE)
    ev = m.evaluate({"workload.concurrency": np.array([1.0, 4.0, 5.0])})
    assert ev["feasible"].tolist() == [True, True, False]


def test_spec_errors_pickle() -> None:
    e = SpecError("f.toml", "a.b", "bad", "good", why="")
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) and back.key == "a.b"


def test_slow_plugin_imports_are_named() -> None:
    from stepwall.plugin import registry

    reg = registry.build(autoload=False)
    reg.import_seconds["heavy"] = 5.0
    (line,) = reg.slow_imports()
    assert "plugin heavy took 5.0 s to import" in line


def test_memory_blames_the_key_the_user_changed(capsys) -> None:
    """Too many users for a dense model's memory: the error names the --set that did it, not
    an expert-parallel degree the scenario never states."""
    from stepwall.cli import main

    assert main(["eval", "llama8b-h100-serving", "--set", "workload.concurrency=100000",
                 "--set", "engine.prefill_chunk=1000000"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--set:workload.concurrency: resident memory per GPU" in err
    assert "parallel.ep" not in err
