"""The entry types plugins return from the hooks that add things by name: an `Analysis`
(``stepwall_analyses``), an output `Format` (``stepwall_formats``), a report `BlockKind`
(``stepwall_report_blocks``), a `Command` (``stepwall_commands``). Each is frozen attrs; the
registry sets ``plugin`` to the name of the plugin that returned it. They sit in the plugin
layer so that the hook specifications can name them; what their functions receive (a model, a
report, a table) belongs to the layers above and is typed ``Any`` here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import attrs

from stepwall.core.options import structure_options
from stepwall.core.units import Dim

if TYPE_CHECKING:
    import numpy as np


def _many_text(results: Sequence[Any]) -> str:
    return "\n\n".join(d.render() for d in results)


def _rows(results: Sequence[Any]) -> tuple[list[str], list[list[Any]]]:
    head = ["key", "value", "feasible_value", "method", "note"]
    return head, [[d.key, d.value, d.feasible_value, d.method, d.note] for d in results]


@attrs.frozen
class Analysis:
    """One analysis: ``run(model, options, context)`` returns a `Derivation` (or a list when
    ``many``). ``text`` renders the results for a terminal, ``table`` as rows (report tables,
    CSV); both have sensible defaults."""

    name: str
    doc: str
    options: type
    run: Callable[..., Any]  # -> a Derivation, or a list of them
    many: bool = False
    text: Callable[[Sequence[Any]], str] = _many_text
    table: Callable[[Sequence[Any]], tuple[list[str], list[list[Any]]]] = _rows
    number_format: str = ".4g"  # how a report shows the values of a list of results
    at_point: bool = False  # a property of the scenario's point: refused where infeasible
    plugin: str = ""


@attrs.frozen
class Metric:
    """One metric of a step model (``stepwall_metrics``; the built-in ones:
    `stepwall.model.metrics`).

    ``unit`` is the unit shown beside its values (eval, sweep and search columns, the
    explorer); ``label`` its short name in words; ``meaning`` one line saying what it is
    (the reference docs and, with ``page_help``, the explorer's tooltip). ``minimize``: less
    is better (search's objectives). ``optional``: NaN where the specs do not state its
    inputs, which is unknown rather than infeasible. ``diagnostic``: it describes the
    configuration, so it keeps its meaning where the point is infeasible. ``objective``: a
    figure of merit, whose best point the explorer's chart marks (not a sizing or a count).

    ``expr(scenario, metrics)``, for a plugin's metric, is its expression in the model's
    parameters, from the built-in metrics' expressions (by name), or None where the scenario
    does not give it; its dimension must be ``dim``.

    Where ``stepwall eval`` shows it (`stepwall.numeric.compiled.summary_of`,
    `stepwall.io.breakdown`): ``key``, its key in eval's JSON, with one dot for a key of an
    object ("memory.bytes_per_gpu"; objects follow the plain keys and ``plugin_metrics``);
    ``place``, its place among those keys (lower first, then in declaration order);
    ``whole``: a count, given as a whole number; ``bounds``, ``(key, metric)``: eval's JSON
    says at ``key``, right after this one, whether ``metric`` is at most this one; ``line``,
    its line in eval's text (none where ""), a `str.format` template of eval's JSON keys
    (dotted) whose format specs also take ``time`` (a duration with its unit),
    ``SPEC/DIVISOR`` (the value divided) and ``YES|NO`` (a truth), left out where the
    metric is unknown. ``clients``: the fields of benchmark clients (vLLM/SGLang
    bench_serving, aiperf/genai-perf) that measure it (docs/metrics-reference.md). A metric
    without a ``key`` (a plugin's, unless it gives one) is
    listed under ``plugin_metrics`` with its label, unit and plugin, and its line says
    those."""

    name: str
    dim: Dim
    unit: str
    label: str
    meaning: str
    minimize: bool = False
    optional: bool = False
    diagnostic: bool = False
    objective: bool = True
    page_help: bool = True
    expr: Callable[[Any, Mapping[str, Any]], Any] | None = None
    key: str = ""
    place: int = 0
    whole: bool = False
    bounds: tuple[str, str] | None = None
    line: str = ""
    clients: str = ""
    plugin: str = ""


@attrs.frozen
class Format:
    """An output format: ``write(table_or_document, stream)``. ``tables``/``documents`` say
    what it can write; ``binary`` formats need a file (``-o``)."""

    name: str
    doc: str
    suffixes: tuple[str, ...]
    write: Callable[[Any, IO[Any]], None]
    tables: bool = True
    documents: bool = False
    binary: bool = False
    plugin: str = ""


def structured(report: Any, options: type, given: dict[str, Any], at: str) -> Any:
    """A block's keys as its options class, errors naming the report file and the block."""
    return structure_options(options, given, report.where, at)


@attrs.frozen
class BlockKind:
    """A block kind: ``render(report, options, at)`` returns Markdown lines and may add
    files (``report.outputs``) and values placeholders can name (``report.ns``). ``early``
    blocks render before the others (they compute what prose refers to); ``prepare`` turns
    the block's keys into options (default: the options class, validated).

    ``compute(report, options, at)``, where given, is the block's heavy work that depends
    only on the models and its options, not on other blocks: the report starts it before
    rendering, possibly in a helper process (`stepwall.numeric.parallel`), and ``render`` takes its
    result with ``report.computed(at, fallback)``. The result must pickle."""

    name: str
    doc: str
    options: type
    render: Callable[[Any, Any, str], list[str]]
    early: bool = False
    prepare: Callable[..., Any] = attrs.field(
        default=attrs.Factory(
            lambda self: lambda report, given, at: structured(report, self.options, given, at),
            takes_self=True,
        )
    )
    plugin: str = ""
    compute: Callable[[Any, Any, str], Any] | None = None


@attrs.frozen
class Command:
    """A ``stepwall NAME`` command a plugin adds: ``setup(parser, registry)`` declares its
    arguments on an argparse parser, ``run(namespace, registry)`` does the work and returns
    the exit code. ``help`` is its line in ``stepwall --help``; ``example`` one command line."""

    name: str
    help: str
    example: str
    setup: Callable[[Any, Any], None]
    run: Callable[[Any, Any], int]
    plugin: str = ""


@attrs.frozen
class LayoutTable:
    """Layouts of deployments, one row each, every column a numpy array of one length: the
    GPUs of the deployment (``gpus``), the value of each spec key the layout sets
    (``degrees``, by path, in `Layouts.keys` order) and the attention ranks of a replica
    (``ranks``: a replica serves users per rank × ranks users)."""

    gpus: np.ndarray
    degrees: Mapping[str, np.ndarray]
    ranks: np.ndarray


@attrs.frozen
class Layouts:
    """How a parallel kind lays deployments of N GPUs out for a search (``stepwall_layouts``):
    ``keys`` the spec keys each layout sets (paths, such as ``"parallel.tp"``, in the order a
    configuration shows them); ``table(gpus, domain)`` every layout of each size in ``gpus``
    with scale-up groups (TP) of at most ``domain`` GPUs, as a `LayoutTable`; ``count(gpus,
    domain)`` how many rows that table has, counted without making them (so that a search too
    large is refused first)."""

    keys: tuple[str, ...]
    table: Callable[[Sequence[int], int], LayoutTable]
    count: Callable[[Sequence[int], int], int]
