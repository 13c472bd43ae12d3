"""Engine × GPU kernel paths (issue 22): an engine profile's ``[FAMILY.PRECISION]`` table
moves an op of that precision on a GPU of that family to the roof it names (``runs_as``) at a
factor on that roof's plateau efficiency; ``--set engine=NAME`` swaps the profile; ``search
--engine a,b`` makes the engine an axis. Expected times are the roofline written out here from
the spec files' own numbers."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import attrs
import pytest
import sympy as sp

from stepwall.apps import search
from stepwall.cli import main
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError
from stepwall.core.laws import FLOPS_PER_MAC
from stepwall.core.roofline import op_terms
from stepwall.core.scenario import Scenario
from stepwall.core.symbols import constants_in, parameter
from stepwall.core.terms import Engine, KernelPath, Op
from stepwall.core.units import DIMENSIONLESS, parse_quantity
from stepwall.plugins.engine import kernel_paths
from stepwall.plugins.gpu import BYTE
from stepwall.spec.validation import load_scenario
from stepwall.testing import model, registry

PREFILL = "dsv3-h200-tp8-prefill"  # DeepSeek FP8 prefill on one H200 node, vllm
SPECS = catalog_root()


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def spec(folder: str, name: str) -> dict[str, Any]:
    """A catalog file's own keys, after its ``from`` chain (read here with tomllib)."""
    doc = tomllib.loads((SPECS / folder / f"{name}.toml").read_text())
    base = doc.pop("from", None)
    if base is None:
        return doc
    merged = spec(folder, base)
    for k, v in doc.items():
        merged[k] = {**merged[k], **v} if isinstance(v, dict) and k in merged else v
    return merged


def si(text: Any) -> float:
    return float(text) if not isinstance(text, str) else parse_quantity(text)[0]


def seconds(sc: Scenario, op: Op, engine: Engine) -> float:
    """The op's roofline term (no floor) at the scenario's values."""
    (term, *_) = op_terms(sc, op, engine, "test")
    expr = term.expr
    return float(expr.subs({**sc.values, **constants_in([expr])}))


def an_op(precision: str, weight_bytes: float, macs: float, kind: str = "gemm",
          kernels: int = 0) -> Op:  # fmt: skip
    """An op with no row ramp (rows 0): its time is max(bytes side, FLOPs side), plus
    ``kernels`` floors."""
    return Op("probe", sp.Float(weight_bytes) * BYTE, sp.Float(macs) * FLOPS_PER_MAC, "test",
              "a probe op", "dense", sp.Integer(kernels), kind=kind,
              precision=precision)  # fmt: skip


H200 = spec("hardware", "h200")


def roof_time(flops: float, precision: str, factor: float = 1.0, kind: str = "gemm") -> float:
    """Compute-bound time at the roof's plateau: the grouped GEMMs' own where the precision's
    section states one (their kernel family), else the GEMM plateau. A weight-only family
    (wna16) runs at the bf16 roof with its own section's plateau."""
    roof = H200["bf16" if precision == "wna16" else precision]
    own = H200.get(precision, {})
    plateau = (
        own.get("moe_efficiency", roof["efficiency"])
        if kind == "grouped_gemm"
        else (roof["efficiency"])
    )
    return flops / (si(roof["flops"]) * si(plateau) * factor)


def test_fp4_on_hopper_runs_as_wna16_in_trtllm() -> None:
    """gpt-oss's MXFP4 experts on Hopper (no FP4 tensor cores): TensorRT-LLM's kernel path
    is W4A16, so the math is at the BF16 roof (not the FP8 one the fallback would pick), at
    the W4A16 kernel family's plateau, and the weights are still streamed at their 4.25 bits."""
    sc = load_scenario(PREFILL, registry().kinds, ["engine=trtllm"])
    (path,) = kernel_paths(sc)
    assert (path.precision, path.runs_as) == ("fp4", "wna16")
    engine = Engine(kernel_paths=(path,))
    macs = 1e15  # compute-bound: 2 PFLOP against a few bytes
    compute = an_op("fp4", 1e3, macs, "grouped_gemm")
    assert seconds(sc, compute, Engine()) == pytest.approx(
        roof_time(2 * macs, "fp8", kind="grouped_gemm")
    )
    assert seconds(sc, compute, engine) == pytest.approx(
        roof_time(2 * macs, "wna16", kind="grouped_gemm")
    )
    # memory-bound: 4.25-bit weights of 10^11 parameters, the same bytes either way, streamed
    # at the rate of the kernel family that runs them (its section's grouped-GEMM values)
    weights = 1e11 * 4.25 / 8
    stream = an_op("fp4", weights, 1e3, "grouped_gemm")

    def bytes_side(family: str) -> float:
        eta = H200[family]["moe_bandwidth_efficiency"]
        return weights / (si(H200["hbm_bandwidth"]) * si(eta))

    assert seconds(sc, stream, engine) == pytest.approx(bytes_side("wna16"))
    assert seconds(sc, stream, Engine()) == pytest.approx(bytes_side("fp8"))
    (term, *_) = op_terms(sc, compute, engine, "test")
    assert "fp4 at the bf16 roof, the engine's kernel path" in term.why


def test_wna16_experts_are_their_own_kernel_family_on_the_bf16_roof() -> None:
    """B200's BF16-weight grouped GEMMs stream at [bf16] moe_bandwidth_efficiency (fitted to
    BF16 expert tables); W4A16 ones never take those values: the GPU's [wna16] section's
    where it states them, else the GPU-wide moe_efficiency and moe_floor."""
    b200 = spec("hardware", "b200")
    assert "moe_bandwidth_efficiency" in b200["bf16"]
    assert "moe_bandwidth_efficiency" not in b200["wna16"]
    sc = load_scenario("k26-b300-tp8-ddtree", registry().kinds, ["hardware=b200"])
    weights = 1e11 * 0.5  # 4-bit weights of 10^11 parameters
    streamed = {}
    for precision in ("bf16", "wna16"):
        op = an_op(precision, weights, 1e3, "grouped_gemm", kernels=1)
        for term in op_terms(sc, op, Engine(), "test"):  # the roofline and one kernel floor
            at = {**sc.values, **constants_in([term.expr])}
            streamed[term.name.replace("probe", precision)] = float(term.expr.subs(at))
    hbm = si(b200["hbm_bandwidth"])
    bf16_rate = hbm * si(b200["bf16"]["moe_bandwidth_efficiency"])
    assert streamed["bf16"] == pytest.approx(weights / bf16_rate)
    assert streamed["wna16"] == pytest.approx(weights / (hbm * si(b200["moe_efficiency"])))
    assert streamed["wna16.floor"] == pytest.approx(si(b200["moe_floor"]))
    assert streamed["bf16.floor"] == pytest.approx(si(b200["bf16"]["moe_floor"]))
    assert streamed["wna16"] > 1.5 * streamed["bf16"]  # the tables' W4A16 penalty


def test_sglang_experts_run_in_their_own_kernel_family_where_the_op_says(tmp_path: Path) -> None:
    """SGLang's Hopper FP8 path names its Triton fused-MoE kernels: a grouped GEMM that runs
    in them (Op.engine_kernels = 1) streams, computes and floors at H200's [triton] values;
    one that does not (0: DeepEP's exchange, DeepGEMM) at [fp8]'s; an expression in between
    picks per layout; a GPU without a [triton] section keeps its own values."""
    kinds = registry().kinds
    sc = load_scenario(PREFILL, kinds, ["engine=sglang"])
    (path,) = kernel_paths(sc)
    engine = Engine(kernel_paths=(path,))
    weights, macs = 4e10, 1e15
    hbm = si(H200["hbm_bandwidth"])

    def probe(bytes_: float, flops: float, w: Any) -> Op:
        return attrs.evolve(an_op("fp8", bytes_, flops, "grouped_gemm", kernels=1),
                            engine_kernels=w)  # fmt: skip

    def times(op: Op, at: dict[Any, Any] | None = None) -> list[float]:
        out = []
        for term in op_terms(sc, op, engine, "test"):  # the roofline, then the floor
            values = {**sc.values, **constants_in([term.expr]), **(at or {})}
            out.append(float(term.expr.subs(values)))
        return out

    for family, w in (("triton", 1), ("fp8", 0)):
        mine = H200[family]
        stream, floor = times(probe(weights, 1e3, w))
        assert stream == pytest.approx(weights / (hbm * si(mine["moe_bandwidth_efficiency"])))
        assert floor == pytest.approx(si(mine["moe_floor"]))
        (compute, _) = times(probe(1e3, macs, w))
        plateau = si(H200["fp8"]["flops"]) * si(mine["moe_efficiency"])
        assert compute == pytest.approx(2 * macs / plateau)
    ep = parameter("probe.ep", DIMENSIONLESS)
    by_layout = probe(weights, 1e3, sp.Piecewise((1, sp.Eq(ep, 1)), (0, True)))
    assert times(by_layout, {ep: 1}) == pytest.approx(times(probe(weights, 1e3, 1)))
    assert times(by_layout, {ep: 8}) == pytest.approx(times(probe(weights, 1e3, 0)))
    assert H200["triton"]["moe_floor"] != H200["fp8"]["moe_floor"]  # the two differ
    plain = plain_h200(tmp_path)
    other = load_scenario(PREFILL, kinds, ["engine=sglang", f"hardware={plain}"])
    ran, stated = (op_terms(other, probe(weights, 1e3, w), engine, "test") for w in (1, 0))
    assert [t.expr for t in ran] == [t.expr for t in stated]


def test_a_family_pays_its_fixed_time_for_each_expert_it_runs() -> None:
    """H200's [triton] family states a fixed time per expert (moe_expert_latency, fitted to
    SGLang's Triton MoE table): a grouped GEMM running E experts in it floors at its kernel
    floor plus E times that time (× the engine's floor factor), its roofline unchanged; in a
    family that states none ([fp8]: CUTLASS), the experts add nothing."""
    kinds = registry().kinds
    sc = load_scenario(PREFILL, kinds, ["engine=sglang"])
    (path,) = kernel_paths(sc)
    engine = Engine(kernel_paths=(path,), floor_factor=sp.Float(1.5))

    def times(w: int, experts: float) -> list[float]:
        op = attrs.evolve(an_op("fp8", 4e9, 1e3, "grouped_gemm", kernels=2),
                          engine_kernels=w, experts=experts)  # fmt: skip
        out = []
        for term in op_terms(sc, op, engine, "test"):
            values = {**sc.values, **constants_in([term.expr])}
            out.append(float(term.expr.subs(values)))
        return out

    per_expert = si(H200["triton"]["moe_expert_latency"])
    assert per_expert > 0 and "moe_expert_latency" not in H200["fp8"]
    (stream, floor), (stream_n, floor_n) = times(1, 0), times(1, 300)
    assert stream_n == pytest.approx(stream)
    assert floor == pytest.approx(2 * si(H200["triton"]["moe_floor"]) * 1.5)
    assert floor_n - floor == pytest.approx(300 * per_expert * 1.5)
    assert times(0, 300) == pytest.approx(times(0, 0))


def test_the_routed_experts_count_the_experts_each_gpu_runs() -> None:
    """moe.routed_experts carries the experts its kernels run on the busiest GPU, summed over
    the MoE layers: the expected distinct experts a step's tokens hit,
    E·(1 − (1 − k/E)^T), over ep, per layer, which the op's bytes state too."""
    built = model("qwen35-fp8-h200-tep8-sglang", sets=["workload.kind=decode",
                  "workload.input_tokens=1024", "workload.context=1536"])  # fmt: skip
    (op,) = [o for o in built.workload.ops if o.name == "moe.routed_experts"]
    values = {**built.scenario.values, **constants_in([op.experts])}
    experts, tokens, layers = 512, 64, 60
    hit = experts * (1 - (1 - 10 / experts) ** tokens)
    assert float(op.experts.subs(values)) == pytest.approx(layers * hit, rel=1e-6)


def without(gpu: str, family: str, tmp_path: Path) -> Path:
    """A GPU's spec file without its ``[family]`` section (and that section's sources)."""
    text = (SPECS / "hardware" / f"{gpu}.toml").read_text()
    plain = tmp_path / f"{gpu}-plain.toml"
    plain.write_text(re.sub(rf"\n\[{family}(\.sources)?\]\n(.+\n)+", "\n", text))
    assert f"[{family}" not in plain.read_text() and "[fp8]" in plain.read_text()
    return plain


def plain_h200(tmp_path: Path) -> Path:
    """H200's spec file without its [triton] section."""
    return without("h200", "triton", tmp_path)


def routed_experts(scenario: str, *sets: str) -> float:
    """Seconds a step of ``scenario`` spends in the routed experts (``moe.routed_experts``
    and its floor, which holds the time per expert), through the CLI."""
    code, out, err = run(["eval", scenario, "--json", *(a for s in sets for a in ("--set", s))])
    assert code == 0, err
    terms = {t["name"]: t for t in json.loads(out)["terms"]}
    return sum(float(terms[n]["seconds"]) for n in ("moe.routed_experts",
                                                    "moe.routed_experts.floor"))  # fmt: skip


def test_the_model_runs_sglang_experts_in_triton_only_without_expert_parallelism(
    tmp_path: Path,
) -> None:
    """DeepSeek-R1's routed experts with SGLang on H200 cost what H200's [triton] family
    prices at TP-8 (no EP: the Triton kernels), and at EP-8 (DeepEP, DeepGEMM) exactly what
    they cost on the same GPU without that family."""
    plain, sc = plain_h200(tmp_path), "dsr1-fp8-h200-tp8-sglang-serving"
    ep8 = ("parallel.tp=1", "parallel.ep=8")
    assert routed_experts(sc, *ep8) == pytest.approx(
        routed_experts(sc, *ep8, f"hardware={plain}"), rel=1e-9)  # fmt: skip
    assert routed_experts(sc) != pytest.approx(routed_experts(sc, f"hardware={plain}"), rel=0.05)


def test_sglang_experts_on_blackwell_run_in_flashinfers_trtllm_gen_kernels(tmp_path: Path
                                                                          ) -> None:  # fmt: skip
    """SGLang's Blackwell FP8 path names FlashInfer's TensorRT-LLM-generation MoE: DeepSeek-R1's
    routed experts at TP-8 on B200 cost what B200's [trtllm_gen] family prices (its own
    streaming rate, floor and time per expert, not DeepGEMM's [fp8]), and at EP-8 (DeepEP,
    DeepGEMM) exactly what they cost without that family."""
    b200 = spec("hardware", "b200")
    assert b200["trtllm_gen"]["moe_bandwidth_efficiency"] != b200["fp8"]["moe_bandwidth_efficiency"]
    plain, sc = without("b200", "trtllm_gen", tmp_path), "dsr1-fp8-b200-tp8-sglang-serving"
    ep8 = ("parallel.tp=1", "parallel.ep=8")
    assert routed_experts(sc, *ep8) == pytest.approx(
        routed_experts(sc, *ep8, f"hardware={plain}"), rel=1e-9)  # fmt: skip
    # streaming at 0.89 of the peak against DeepGEMM's 0.79, a lower floor and less per
    # expert: the experts cost less
    assert routed_experts(sc) < routed_experts(sc, f"hardware={plain}") * 0.9


BLACKWELL = ("b200", "gb200", "b300", "gb300")


def split_expert_shapes(gpu: str) -> dict[tuple[str, ...], list[str]]:
    """The FP8 split-expert rows of ``gpu``'s MoE table (sources naming a moe_tp split), as
    shape (hidden, inter per GPU, experts, top-k, ep) -> token counts."""
    table = (SPECS / "calibration" / f"{gpu}-moe.csv").read_text().splitlines()
    out: dict[tuple[str, ...], list[str]] = {}
    for line in table[1:]:
        cols = line.split(",")
        if cols[8] == "fp8" and "deepgemm (moe_tp" in cols[10] and "moe_tp 1:" not in cols[10]:
            assert f"/{gpu}" in cols[10], line  # timed on this GPU, not copied from another
            out.setdefault(tuple(cols[2:7]), []).append(cols[1])
    return out


def test_blackwell_fp8_tables_hold_the_same_split_experts_as_b200s() -> None:
    """tools/aic_split_moe_rows.py gives GB200's, B300's and GB300's FP8 MoE tables B200's
    split-expert DeepGEMM shapes (DeepSeek-V3's experts split 2, 4 and 8 ways at EP-8,
    Mixtral's split 8 ways and 2 ways at EP-4), each timed on that GPU: the rows that tell a
    per-expert time from the streaming rate."""
    b200 = split_expert_shapes("b200")
    assert len(b200) == 5 and all(len(t) == 8 for t in b200.values())
    for gpu in BLACKWELL[1:]:
        assert split_expert_shapes(gpu) == b200, gpu


def test_blackwell_fp8_experts_pay_a_fixed_time_per_expert() -> None:
    """Each Blackwell GPU's [fp8] section states DeepGEMM's fixed time per expert, fitted to
    its own table (its sources entry names it); DeepSeek-R1's routed experts at EP-8 on B200
    (DeepEP, DeepGEMM) pay it once per expert the kernels run: the step's expert time grows
    in proportion to it."""
    for gpu in BLACKWELL:
        fp8 = spec("hardware", gpu)["fp8"]
        assert si(fp8["moe_expert_latency"]) > 0, gpu
        assert f"{gpu}-moe.csv" in fp8["sources"]["moe_expert_latency"], gpu
    t_e = si(spec("hardware", "b200")["fp8"]["moe_expert_latency"])
    sc, ep8 = "dsr1-fp8-b200-tp8-sglang-serving", ("parallel.tp=1", "parallel.ep=8")

    def at(seconds: float) -> float:
        return routed_experts(sc, *ep8, f"hardware.fp8.moe_expert_latency={seconds * 1e9}ns")

    none, once, twice = at(0), at(t_e), at(2 * t_e)
    assert once > none * 1.02
    assert twice - none == pytest.approx(2 * (once - none), rel=1e-6)


def test_a_scenario_states_its_own_kernel_path(tmp_path: Path) -> None:
    """A scenario's [engine.FAMILY.PRECISION] names the kernels its engine runs where the
    profile does not: Nemotron-3-Super's ModelOpt FP8 experts with vLLM on B200 run in
    FlashInfer's TensorRT-LLM-generation MoE (NVIDIA's deployment guide), priced by B200's
    [trtllm_gen] family, not by DeepGEMM's [fp8] values as without that family."""
    sc = "nemotron3-super-fp8-b200-tp2-vllm"
    text = (SPECS / "scenarios" / f"{sc}.toml").read_text()
    assert tomllib.loads(text)["engine"]["blackwell"]["fp8"]["moe_kernels"] == "trtllm_gen"
    plain = without("b200", "trtllm_gen", tmp_path)
    assert routed_experts(sc) < routed_experts(sc, f"hardware={plain}") * 0.8


def test_a_path_applies_only_on_its_family() -> None:
    """trtllm's Hopper FP4 path is not taken on Blackwell (FP4 tensor cores) nor on another
    family; sglang's Hopper path only names its own FP8 expert kernels."""
    kinds = registry().kinds
    assert kernel_paths(load_scenario("gptoss-b200-tp4", kinds, ["engine=trtllm"])) == ()
    assert kernel_paths(load_scenario(PREFILL, kinds, ["hardware.family=cdna3"])) == ()
    sglang = kernel_paths(load_scenario(PREFILL, kinds, ["engine=sglang"]))
    assert [(k.precision, k.runs_as, k.moe_kernels) for k in sglang] == [("fp8", "fp8", "triton")]
    blackwell = kernel_paths(load_scenario("dsr1-fp8-b200-tp8-sglang-serving", kinds))
    assert [(k.precision, k.moe_kernels) for k in blackwell] == [("fp8", "trtllm_gen")]
    assert kernel_paths(load_scenario(PREFILL, kinds)) == ()  # vllm 0.24: none
    assert len(kernel_paths(load_scenario(PREFILL, kinds, ["engine=trtllm"]))) == 1


def test_a_family_is_inherited_along_the_hardware_from_chain() -> None:
    """mi325x starts from mi300x (CDNA3) and takes the 2025 ROCm build's CDNA3 path; mi355x
    (CDNA4) does not."""
    kinds = registry().kinds
    sets = ["engine=sglang-rocm-2025"]
    for hardware, paths in (("mi300x", 1), ("mi325x", 1), ("mi355x", 0)):
        sc = load_scenario("dsv3-mi300x-tp8", kinds, [*sets, f"hardware={hardware}"])
        assert len(kernel_paths(sc)) == paths, hardware


def test_an_efficiency_factor_scales_the_compute_side() -> None:
    """vLLM 0.14's Hopper FP8 kernels: dense GEMMs at 0.547 and grouped GEMMs at 0.625 of the
    FP8 roof's calibrated plateau (its profile's numbers), the bytes side unchanged."""
    sc = load_scenario(PREFILL, registry().kinds, ["engine=vllm-0.14"])
    own = spec("engines", "vllm-0.14")["hopper"]["fp8"]
    (path,) = kernel_paths(sc)
    engine = Engine(kernel_paths=(path,))
    macs = 1e15
    dense = seconds(sc, an_op("fp8", 1e3, macs), engine)
    moe = seconds(sc, an_op("fp8", 1e3, macs, "grouped_gemm"), engine)
    assert dense == pytest.approx(roof_time(2 * macs, "fp8", own["efficiency_factor"]))
    assert moe == pytest.approx(
        roof_time(2 * macs, "fp8", own["moe_efficiency_factor"], "grouped_gemm")
    )
    bf16 = an_op("bf16", 1e3, macs)  # another precision: no path
    assert seconds(sc, bf16, engine) == pytest.approx(roof_time(2 * macs, "bf16"))
    assert KernelPath("bf16", "bf16") == engine.kernel_path("bf16")


def test_the_factor_moves_a_prefill_eval() -> None:
    """The same prefill through vllm (0.24: no Hopper path) and vllm-0.14 (its FP8 path):
    the compute-bound step is slower, by at most 1/0.547."""
    code, fast, err = run(["eval", PREFILL, "--json"])
    assert code == 0, err
    code, slow, err = run(["eval", PREFILL, "--set", "engine=vllm-0.14", "--json"])
    assert code == 0, err
    a, b = json.loads(fast)["step_time_s"], json.loads(slow)["step_time_s"]
    assert a < b <= a / 0.547 + 1e-12


@pytest.mark.parametrize(
    ("body", "key", "said"),
    [
        ('[hoper.fp4]\nruns_as = "bf16"\n', "engine.hoper.fp4.runs_as", "unknown key"),
        ('[hopper.fp6]\nruns_as = "bf16"\n', "engine.hopper.fp6.runs_as", "unknown key"),
        ('[hopper.fp4]\nruns_as = "fp6"\n', "engine.hopper.fp4.runs_as", "'fp6' is not allowed"),
        ("[hopper.fp8]\nefficiency_factor = -1\n", "engine.hopper.fp8.efficiency_factor", ""),
        ('date = "2026-13"\n', "engine.date", "'2026-13' is not a release date"),
        (
            '[hopper.fp8]\nmoe_kernels = "cutlass"\n',
            "engine.hopper.fp8.moe_kernels",
            "'cutlass' is not allowed",
        ),
    ],
)
def test_a_bad_kernel_path_or_date_is_one_line_naming_the_key(
    tmp_path: Path, body: str, key: str, said: str
) -> None:
    engine = tmp_path / "my-engine.toml"
    engine.write_text(f'name = "mine"\nkind = "engine"\n{body}')
    code, out, err = run(["check", str(engine)])
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"stepwall: error: {engine}:{key}: {said}")


def test_a_bad_family_is_one_line_with_did_you_mean() -> None:
    code, _, err = run(["eval", PREFILL, "--set", "hardware.family=hoper"])
    assert code == 2
    assert err.strip() == (
        "stepwall: error: --set:hardware.family: 'hoper' is not allowed; did you mean "
        "'hopper'? (expected one of: hopper, blackwell, blackwell-rtx, cdna3, cdna4)"
    )


def test_a_path_faster_than_the_peak_is_infeasible() -> None:
    """η_fp8 × κ > 1 would beat the tensor cores' peak: eval refuses it."""
    eff = si(H200["fp8"]["efficiency"])
    code, _, err = run(["eval", PREFILL, "--set", "engine=vllm-0.14",
                        "--set", f"engine.hopper.fp8.efficiency_factor={1.01 / eff}"])  # fmt: skip
    assert code == 2
    assert "engine.hopper.fp8.efficiency_factor" in err and "peak" in err


def test_set_engine_is_the_same_as_naming_it_in_the_scenario(tmp_path: Path) -> None:
    """``--set engine=sglang`` and ``--set engine.from=sglang`` load what a scenario naming
    sglang loads; the scenario's own engine keys still apply over it."""
    text = (SPECS / "scenarios" / f"{PREFILL}.toml").read_text()
    assert 'engine = "vllm"' in text
    mine = tmp_path / "mine.toml"
    mine.write_text(text.replace('engine = "vllm"', 'engine = "sglang"'))
    kinds = registry().kinds
    named = load_scenario(mine, kinds)
    for assignment in ("engine=sglang", "engine.from=sglang"):
        swapped = load_scenario(PREFILL, kinds, [assignment])
        assert {s.name: v for s, v in swapped.values.items()} == {
            s.name: v for s, v in named.values.items()
        }
        assert swapped.sources["engine.memory_fraction"] == named.sources["engine.memory_fraction"]
    over = load_scenario(PREFILL, kinds, ["engine=sglang", "engine.prefill_chunk=1024"])
    assert over.values[over.parameter("engine.prefill_chunk")] == 1024


def test_an_unknown_engine_is_one_line_with_did_you_mean() -> None:
    code, _, err = run(["eval", PREFILL, "--set", "engine=sglng"])
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(
        "stepwall: error: --set:engine: no engines entry named 'sglng'; did you mean 'sglang'?"
    )
    with pytest.raises(SpecError, match="is not a name"):
        load_scenario(PREFILL, registry().kinds, ["engine.from=3"])


def test_check_prints_the_engine_release() -> None:
    doc = spec("engines", "vllm")
    code, out, _ = run(["check", PREFILL])
    assert code == 0
    assert out.splitlines()[-1] == f"engine vllm: release {doc['version']} ({doc['date']})"


@pytest.mark.parametrize("name", ["trtllm", "vllm", "vllm-0.14", "sglang", "sglang-rocm-2025"])
def test_engine_profiles_state_their_release_with_sources(name: str) -> None:
    doc = spec("engines", name)
    assert doc["version"] and doc["date"]
    assert doc["sources"]["version"] and doc["sources"]["date"]


def test_search_with_two_engines_reports_per_hardware_and_engine() -> None:
    spec_ = search.Spec(targets=(search.parse_condition("tokens_per_s_per_user>=20", "--at"),))
    plan = search.plan_search(
        "deepseek-v3-fp8",
        ["h200"],
        ["hgx-h200-ib"],
        gpus=[8],
        engines=["trtllm", "vllm-0.14"],
        batch=[1, 64],
        spec=spec_,
    )
    assert [(o.label, o.engine) for o in plan.options] == [
        ("h200 trtllm", "trtllm"),
        ("h200 vllm-0.14", "vllm-0.14"),
    ]
    result = search.run_search(plan)
    for p in result.frontier:
        engine = p["option"].split(" ")[1]
        assert p["config"]["engine"] == engine
        assert f"engine={engine}" in p["command"]
    (best,) = result.best
    assert sorted(best["ranking"]) == ["h200 trtllm", "h200 vllm-0.14"]
    doc = search.document(result)
    assert [o["engine"] for o in doc["options"]] == ["trtllm", "vllm-0.14"]
    # each option's best point is what its own eval command gives
    for o in best["options"]:
        code, out, err = run([*o["point"]["command"].split()[1:], "--json"])
        assert code == 0, err
        assert json.loads(out)["tokens_per_s_per_gpu"] == pytest.approx(
            o["point"]["tokens_per_s_per_gpu"]
        )


def test_search_refuses_an_engine_twice_or_unknown() -> None:
    with pytest.raises(SpecError, match="is given twice"):
        search.plan_search("deepseek-v3-fp8", ["h200"], ["hgx-h200-ib"], gpus=[8],
                           engines=["trtllm", "trtllm"])  # fmt: skip
    with pytest.raises(SpecError) as e:
        search.plan_search("deepseek-v3-fp8", ["h200"], ["hgx-h200-ib"], gpus=[8],
                           engines=["trtllm", "vlm"])  # fmt: skip
    assert (e.value.where, e.value.key) == ("--engine", "vlm")
    with pytest.raises(SpecError, match="is named by the search's options"):
        search.plan_search("deepseek-v3-fp8", ["h200"], ["hgx-h200-ib"], gpus=[8],
                           engines=["trtllm"], sets=["engine=vllm"])  # fmt: skip
