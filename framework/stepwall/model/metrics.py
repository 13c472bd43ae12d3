"""The metrics a model reports, each declared once (`stepwall.plugin.entries.Metric`): name,
dimension, unit shown, meaning, which way is better, and whether it may be unknown or
describes a configuration.

Everything that lists metrics reads `BUILTIN_METRICS` (through `METRICS` and the sets
below) and the plugins' ``stepwall_metrics`` (`declared`): the composer checks each metric's
expression against its dimension (`check_dimensions`), the compiled model orders its outputs
by them, and eval, sweep, search, the explorer and the reference docs take their columns,
units, objectives and labels from them.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

from stepwall.core.dimensions import dimension_of
from stepwall.core.errors import DimensionError, PluginError
from stepwall.core.units import (
    CURRENCY,
    DIMENSIONLESS,
    ENERGY,
    FREQUENCY,
    INFORMATION,
    POWER,
    TIME,
)
from stepwall.numeric.compiled import EVAL_KEYS
from stepwall.plugin.entries import Metric
from stepwall.plugin.registry import Registry

__all__ = [
    "BUILTIN_METRICS",
    "DIAGNOSTIC_METRICS",
    "METRICS",
    "METRIC_UNITS",
    "MINIMIZE",
    "OPTIONAL_METRICS",
    "Metric",
    "check_dimensions",
    "declared",
]


_TOKEN_RATE = FREQUENCY  # tokens are counts: tokens/s is a rate

# eval's text lines (`Metric.line`): the label padded to 22 columns, then the values
BUILTIN_METRICS: tuple[Metric, ...] = (
    Metric("step_time_s", TIME, "s", "step time",
           "one decode step (every term, overlapped ones once)", minimize=True,
           key="step_time_s", place=1, line="step time             {step_time_s:time}"),
    Metric("tokens_per_s_per_user", _TOKEN_RATE, "tokens/s", "tokens/s per user",
           "accepted tokens per step / step time", key="tokens_per_s_per_user", place=2,
           line="tokens/s per user     {tokens_per_s_per_user:.1f}",
           clients="bench_serving: 1000/`median_tpot_ms`; aiperf: "
                   "`output_token_throughput_per_user`"),
    Metric("tpot_s", TIME, "s", "time per output token",
           "step time / accepted tokens per step (1 / tokens per user)", minimize=True,
           key="tpot_s", place=2,
           line="TPOT, ITL             {tpot_s:time}, {itl_s:time}   (per token; between "
                "streamed chunks)",
           clients="bench_serving: `median_tpot_ms`; aiperf, genai-perf: `inter_token_latency`"),
    Metric("itl_s", TIME, "s", "inter-token latency",
           "time between streamed chunks: one step (with MTP a chunk holds the accepted "
           "tokens)", minimize=True, key="itl_s", place=2,
           clients="bench_serving: `median_itl_ms`; aiperf: `inter_chunk_latency`"),
    Metric("tokens_per_s", _TOKEN_RATE, "tokens/s", "tokens/s (all users)",
           "every replica's users together", key="tokens_per_s", place=3,
           line="tokens/s              {tokens_per_s:.1f}",
           clients="bench_serving: `output_throughput`; aiperf: `output_token_throughput`"),
    Metric("tokens_per_s_per_gpu", _TOKEN_RATE, "tokens/s", "tokens/s per GPU",
           "one replica's users over its GPUs", key="tokens_per_s_per_gpu", place=4,
           line="tokens/s per GPU      {tokens_per_s_per_gpu:.1f}   ({gpus} GPUs)"),
    Metric("output_tokens_per_s_per_gpu", _TOKEN_RATE, "tokens/s", "output tokens/s per GPU",
           "output tokens/s per GPU, the same as tokens_per_s_per_gpu",
           key="output_tokens_per_s_per_gpu", place=4,
           clients="bench_serving: `output_throughput`; aiperf: `output_token_throughput`; "
                   "InferenceX: `output_tput_per_gpu`"),
    Metric("total_tokens_per_s_per_gpu", _TOKEN_RATE, "tokens/s", "total tokens/s per GPU",
           "input and output tokens/s per GPU: output × (ISL + OSL)/OSL (a prefill pool: "
           "its prompt tokens)", key="total_tokens_per_s_per_gpu", place=4,
           line="total tokens/s/GPU    {total_tokens_per_s_per_gpu:.1f}   (input + output)",
           clients="bench_serving, aiperf: `total_token_throughput`; InferenceX: "
                   "`tput_per_gpu` (aggregated)"),
    Metric("ttft_s", TIME, "s", "time to first token",
           "median time to first token under load: the wait for the prefill capacity, then "
           "the prompt's prefill (docs/physics.md, Serving metrics and queueing)",
           minimize=True, key="ttft_s", place=5,
           line="time to first token   {ttft_s:time} median, {ttft_p90_s:time} p90, "
                "{ttft_p99_s:time} p99   (under load)",
           clients="bench_serving: `median_ttft_ms`; aiperf: `time_to_first_token` p50"),
    Metric("ttft_p90_s", TIME, "s", "time to first token, p90",
           "90th percentile of the time to first token under load", minimize=True,
           key="ttft_p90_s", place=5,
           clients="bench_serving: `p90_ttft_ms`; aiperf: `time_to_first_token` p90"),
    Metric("ttft_p99_s", TIME, "s", "time to first token, p99",
           "99th percentile of the time to first token under load", minimize=True,
           key="ttft_p99_s", place=5,
           clients="bench_serving: `p99_ttft_ms`; aiperf: `time_to_first_token` p99"),
    Metric("prefill_s", TIME, "s", "prefill alone",
           "one prompt's prefill alone on a replica (the model's prefill step)",
           minimize=True, key="prefill_s", place=5,
           line="prefill alone         {prefill_s:time}   (one prompt; "
                "{prefill_tokens_per_s_per_gpu:.0f} tokens/s per GPU)"),
    Metric("kv_transfer_s", TIME, "s", "KV transfer",
           "the prompt's KV cache sent from a prefill pool to this decode pool over the "
           "scale-out network (workload.kv_transfer; 0 otherwise), part of prefill alone",
           minimize=True, objective=False, key="kv_transfer_s", place=5),
    Metric("e2e_latency_s", TIME, "s", "request latency",
           "median end-to-end request latency: time to first token, then OSL − 1 tokens at "
           "the TPOT", minimize=True, key="e2e_latency_s", place=7,
           line="request latency       {e2e_latency_s:time} median   "
                "({request_rate_per_s:.3g} requests/s)",
           clients="bench_serving: `median_e2el_ms`; aiperf: `request_latency` p50"),
    Metric("request_rate_per_s", FREQUENCY, "1/s", "requests/s",
           "completed requests per second, all replicas", key="request_rate_per_s", place=7,
           clients="bench_serving, aiperf: `request_throughput`"),
    Metric("prefill_tokens_per_s_per_gpu", _TOKEN_RATE, "tokens/s", "prefill tokens/s per GPU",
           "prompt tokens per second per GPU in the prefill step",
           key="prefill_tokens_per_s_per_gpu", place=6),
    Metric("pd_prefill_gpus", DIMENSIONLESS, "", "prefill GPUs (P/D)",
           "GPUs a separate prefill pool needs to feed this decode pool's requests "
           "(disaggregated prefill/decode)", minimize=True, objective=False,
           key="pd_prefill_gpus", place=8),
    Metric("pd_tokens_per_s_per_gpu", _TOKEN_RATE, "tokens/s", "tokens/s per GPU (P/D)",
           "output tokens/s over decode and prefill GPUs together "
           "(disaggregated prefill/decode)", key="pd_tokens_per_s_per_gpu", place=9),
    Metric("pd_total_tokens_per_s_per_gpu", _TOKEN_RATE, "tokens/s",
           "total tokens/s per GPU (P/D)", "input and output tokens/s over decode and "
           "prefill GPUs together (disaggregated prefill/decode)",
           key="pd_total_tokens_per_s_per_gpu", place=9,
           clients="InferenceX: `tput_per_gpu` (disaggregated: prefill and decode GPUs)"),
    Metric("gpus", DIMENSIONLESS, "", "GPUs", "every replica's GPUs", minimize=True,
           diagnostic=True, objective=False, key="gpus", place=10, whole=True),
    Metric("memory_bytes_per_gpu", INFORMATION, "B", "memory per GPU",
           "weights and KV cache resident on each GPU", minimize=True, diagnostic=True,
           objective=False, page_help=False, key="memory.bytes_per_gpu", place=21,
           line="memory per GPU        {memory.bytes_per_gpu:.1f/1e9} GB of "
                "{memory.capacity_per_gpu:.1f/1e9} GB usable: {memory.fits:fits|DOES NOT FIT}"),
    Metric("memory_capacity_per_gpu", INFORMATION, "B", "usable memory per GPU",
           "the device's memory × the engine's memory fraction", diagnostic=True,
           objective=False, page_help=False, key="memory.capacity_per_gpu", place=22,
           bounds=("memory.fits", "memory_bytes_per_gpu")),
    Metric("weight_bytes_per_gpu", INFORMATION, "B", "weights per GPU",
           "the model weights each GPU holds", minimize=True, diagnostic=True,
           objective=False, page_help=False, key="memory.weight_bytes_per_gpu", place=23),
    Metric("kv_bytes_per_gpu", INFORMATION, "B", "KV cache per GPU",
           "the KV cache each GPU holds", minimize=True, diagnostic=True, objective=False,
           page_help=False, key="memory.kv_bytes_per_gpu", place=24),
    Metric("joules_per_token", ENERGY, "J", "energy per token",
           "board power / tokens/s per GPU", minimize=True, optional=True,
           key="joules_per_token", place=11,
           line="energy per token      {joules_per_token:.3g} J   (GPU board power)"),
    Metric("tokens_per_s_per_mw", _TOKEN_RATE / POWER, "tokens/s", "tokens/s per MW",
           "tokens/s per GPU / (board power × PUE), per megawatt", optional=True,
           key="tokens_per_s_per_mw", place=12,
           line="tokens/s per MW       {tokens_per_s_per_mw:.4g}   (board power × PUE)"),
    Metric("usd_per_million_tokens", CURRENCY, "USD", "USD per 1M tokens",
           "GPU-hour price / tokens per GPU-hour, per million", minimize=True, optional=True,
           key="usd_per_million_tokens", place=13,
           line="USD per 1M tokens     {usd_per_million_tokens:.3g}"),
)  # fmt: skip

METRICS = tuple(m.name for m in BUILTIN_METRICS)
METRIC_UNITS = {m.name: m.unit for m in BUILTIN_METRICS}
# energy and cost (`stepwall.model.economics`): unknown where the specs do not state their inputs
OPTIONAL_METRICS = frozenset(m.name for m in BUILTIN_METRICS if m.optional)
MINIMIZE = frozenset(m.name for m in BUILTIN_METRICS if m.minimize)  # the rest are maximised
DIAGNOSTIC_METRICS = frozenset(m.name for m in BUILTIN_METRICS if m.diagnostic)


def declared(registry: Registry) -> tuple[Metric, ...]:
    """The built-in metrics, then those the registry's plugins declare; a plugin's metric
    needs an ``expr`` and may not take a built-in's name, nor a key in eval's JSON that
    another metric or eval itself has."""
    extra = tuple(registry.metrics.values())
    taken = set(EVAL_KEYS) | {k for m in BUILTIN_METRICS for k in _keys(m)}
    for m in extra:
        if m.name in METRIC_UNITS:
            raise PluginError(f"plugin {m.plugin}: metric {m.name!r} is a built-in metric")
        if m.expr is None:
            raise PluginError(f"plugin {m.plugin}: metric {m.name!r} has no expr")
        keys = _keys(m)
        if taken.intersection(keys):
            raise PluginError(f"plugin {m.plugin}: metric {m.name!r}: eval's JSON has a key "
                              f"{sorted(taken.intersection(keys))[0]!r} already")  # fmt: skip
        taken.update(keys)
    return (*BUILTIN_METRICS, *extra)


def _keys(m: Metric) -> tuple[str, ...]:
    """The keys ``m`` takes in eval's JSON (`stepwall.numeric.compiled.summary_of`) and the
    objects its dotted ones are in."""
    keys = [k for k in (m.key, m.bounds[0] if m.bounds else "") if k]
    return (*keys, *(k.partition(".")[0] for k in keys if "." in k))


def check_dimensions(exprs: Mapping[str, sp.Expr], declared: tuple[Metric, ...]) -> None:
    """Raise a PluginError for an expression that is not one of ``declared``'s metrics or
    whose dimension is not its declaration's."""
    by_name = {m.name: m for m in declared}
    for name, expr in exprs.items():
        metric = by_name.get(name)
        if metric is None:
            raise PluginError(f"metric {name!r} is not declared")
        if sp.sympify(expr).is_zero:  # nothing to pay (no such term): any dimension's zero
            continue
        try:
            found = dimension_of(expr)
        except DimensionError as e:
            raise PluginError(f"metric {name!r}: {e}") from e
        if found != metric.dim:
            raise PluginError(f"metric {name!r} is {found}, declared {metric.dim}")
