"""The flow's data: work, collectives, terms. Each is frozen and checked where it is made.

A `Term` is one additive piece of the step time with its provenance (plugin, reason). Its
expression must have the dimension of time; that is checked when the term is created, so a
plugin that adds bytes to seconds fails naming itself and the term.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import sympy as sp

from stepwall.core import symbols
from stepwall.core.errors import DimensionError
from stepwall.core.units import DIMENSIONLESS, INFORMATION, OPERATION, TIME, Dim

_NOT_FINITE = (sp.nan, sp.zoo, sp.oo, -sp.oo)


def _check(expr: sp.Basic, want: Dim, *, what: str, name: str, plugin: str) -> None:
    """Refuse ``expr`` unless it is a finite sympy expression of dimension ``want`` (an
    exact zero has every dimension: "no time"). A Python number was made sympy's by the
    field's converter (`_sympified`)."""
    if not isinstance(expr, sp.Basic):
        raise DimensionError(
            f"{what} must be a sympy expression, not {type(expr).__name__}",
            term=name,
            plugin=plugin,
        )
    if expr.has(*_NOT_FINITE):
        raise DimensionError(f"{what} is not finite: {expr}", term=name, plugin=plugin)
    if expr.is_Number and expr.is_zero:
        return
    try:
        got = symbols.dim(expr)
    except DimensionError as e:
        raise e.located(term=name, plugin=plugin) from None
    if got != want:
        raise DimensionError(
            f"{what} must have dimension {want}",
            left=str(got),
            right=str(want),
            term=name,
            plugin=plugin,
        )


Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]  # attrs' field validator


def _sympified(value: object) -> object:
    """A Python number as sympy's; anything else as given (its validator refuses it)."""
    return sp.sympify(value) if isinstance(value, int | float) else value


def _dimension(want: Dim, what: str) -> Validator:
    """A validator: the field is an expression of dimension ``want`` (see `_check`);
    ``what`` names it in a message, ``{attr}`` standing for the field's name."""

    def validate(item: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        _check(value, want, what=what.format(attr=attribute.name), name=item.name,
               plugin=item.plugin)  # fmt: skip

    return validate


def _text(what: str) -> Validator:
    """A validator refusing a label of a plugin-made ``what`` that is not text (a TypeError,
    which the registry reports naming the plugin and hook that made it)."""

    def validate(item: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, str):
            raise TypeError(
                f"{what} {attribute.name} must be text, not {type(value).__name__} {value!r}"
            )

    return validate


def _zero() -> sp.Expr:
    return sp.Integer(0)


@attrs.frozen
class Term:
    """One piece of the step time: ``expr`` seconds, contributed by ``plugin`` because ``why``.

    ``group`` names the part of the step it belongs to (moe, attention, comm, base, spec);
    terms sharing a non-empty ``overlap`` tag run concurrently: the step takes the Max over
    their groups' sums instead of the sum.
    """

    name: str = attrs.field(validator=_text("term"))
    expr: sp.Expr = attrs.field(converter=_sympified, validator=_dimension(TIME, "a term"))
    plugin: str = attrs.field(validator=_text("term"))
    why: str = attrs.field(validator=_text("term"))
    group: str = attrs.field(default="base", validator=_text("term"))
    overlap: str = attrs.field(default="", validator=_text("term"))


PRECISIONS = ("bf16", "fp8", "fp4", "int8")  # math precisions a GPU's tensor cores run
# weight-only kernels (WNA16, vLLM's name): 4- or 8-bit weights streamed and dequantised in
# the kernel before BF16 math (INT4 or MXFP4 experts, W8A16 Marlin, on mixed-input grouped
# GEMMs). They run at the bf16 roof but are their own kernel family (`stepwall.core.roofline`)
WEIGHT_ONLY = ("wna16",)
OP_PRECISIONS = PRECISIONS + WEIGHT_ONLY  # what an op's GEMMs may be stated to run as
# an engine's own routed-expert kernels, a GPU kernel family of their own (``[hardware.NAME]``)
# that a kernel path may name (`KernelPath.moe_kernels`), each with what it is in words
EXPERT_LIBRARIES = {
    "triton": "Triton's fused-MoE kernels (SGLang, vLLM)",
    "trtllm_gen": "FlashInfer's TensorRT-LLM-generation fused MoE (SGLang, vLLM on Blackwell)",
}
# GPU architecture families an engine's kernel paths are stated for (`KernelPath`)
FAMILIES = ("hopper", "blackwell", "blackwell-rtx", "cdna3", "cdna4")
# scale-up fabrics (``cluster.scale_up`` kinds) an engine's own collective laws are stated for
SCALE_UP_KINDS = ("nvlink", "pcie", "infinity-fabric")
RAMPS = ("rows", "expert_rows", "context")  # what an op kind's compute ramp is in
# the term that sends a prompt's KV cache to a decode pool (`Step.kv_transfer`): the
# composer reports its time apart (``kv_transfer_s``) for a disaggregated deployment's TTFT
KV_TRANSFER_TERM = "comm.kv_transfer"


@attrs.frozen
class OpKind:
    """A kind of per-GPU work (`Op.kind`); the built-in ones are `OP_KINDS`, plugins add
    their own (``stepwall_op_kinds``).

    ``ramp``: what its compute ramp is in, ``rows`` through a GEMM, ``expert_rows`` (the
    routed experts' rows, where the hardware ramps them on their own) or ``context``, the KV
    tokens each query reads; ``serial``: one sequence's stream may be capped at a rate of its
    own; ``chain_alongside``: its chain of dependent steps (`Op.chain`) runs alongside its
    streaming and math, a side of its roof (a GEMM's k-loop), not after them (a chunked
    recurrence's chunks, each waiting for the last one's state). How a hardware kind prices
    it (which of its fields) is that kind's to say:
    ``pricing``, by hardware kind, what that kind takes (kind gpu: a
    `stepwall.core.roofline.GpuPricing`, the built-in kinds' in its ``GPU_PRICING``)."""

    name: str
    meaning: str
    ramp: str = attrs.field(default="rows", validator=attrs.validators.in_(RAMPS))
    serial: bool = False
    chain_alongside: bool = False
    pricing: Mapping[str, Any] = attrs.field(factory=dict)
    plugin: str = ""


OP_KINDS = {
    k.name: k
    for k in (
        OpKind("gemm", "a weight-streaming GEMM", chain_alongside=True),
        OpKind("grouped_gemm", "the grouped GEMMs of the routed experts", "expert_rows"),
        OpKind("attention", "decode or prefill attention over the KV cache", "context",
               serial=True),
        OpKind("gqa_attention", "grouped-query attention over the KV cache: a kernel family "
               "of its own (TensorRT-LLM's generation kernels, XQA on Hopper; FlashInfer), priced "
               "as attention where the GPU states no values of its own; one sequence's cache "
               "is split over the GPU (multi-block mode), so no per-sequence rate binds",
               "context"),
        OpKind("elementwise", "small elementwise kernels (norms, RoPE, activations)"),
        OpKind("recurrence", "a linear-attention layer's recurrent-state kernels (causal conv, "
               "delta rule or selective scan, gated norm)"),
        OpKind("chunked_recurrence", "a linear-attention layer's prompt tokens in the chunked "
               "form (FLA's chunk_gated_delta_rule pipeline): a kernel family of its own, priced "
               "as a recurrence where the GPU states no values of its own"),
        OpKind("chunked_scan", "a state-space layer's prompt tokens in Mamba-2's chunked scan "
               "(SSD: mamba_chunk_scan_combined), priced as a recurrence: no table of its "
               "kernels is at hand"),
    )
}  # fmt: skip


def check_kinds(ops: Iterable[Op], kinds: Mapping[str, OpKind]) -> None:
    """Refuse an op whose kind ``kinds`` does not declare (a `DimensionError` naming it)."""
    for op in ops:
        if op.kind not in kinds:
            raise DimensionError(f"op kind {op.kind!r} is not one of {', '.join(kinds)}",
                                 term=op.name, plugin=op.plugin)  # fmt: skip


def _one_of(what: str, allowed: tuple[str, ...]) -> Validator:
    """A validator: the field is one of ``allowed`` (a `DimensionError` naming the op)."""

    def validate(item: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in allowed:
            raise DimensionError(f"{what} {value!r} is not one of {', '.join(allowed)}",
                                 term=item.name, plugin=item.plugin)  # fmt: skip

    return validate


@attrs.frozen
class Op:
    """Per-GPU work of one step: bytes moved from memory and FLOPs, in ``kernels`` launches.

    ``kind`` names its `OpKind`, which says which floors and efficiencies apply (a
    weight-streaming GEMM, the grouped GEMMs of the routed experts, decode/prefill attention,
    small elementwise kernels, or a plugin's kind; the composer checks it: `check_kinds`);
    ``precision`` the math the tensor cores run (an INT4 W4A16 GEMM computes in bf16, an NVFP4
    one in fp4); ``rows`` the tokens through each GEMM (per expert for grouped GEMMs), or the
    KV tokens each query attends to in an attention kernel, which set how close it gets to
    its compute plateau (0: no such ramp); ``serial_bytes`` the
    bytes one sequence must stream by itself (one user's KV cache in decode attention, which
    a kernel can split only so far); ``counted_rows`` the rows per expert a grouped GEMM's
    kernel counts to choose its m-block, tokens given × k / experts held (0: ``rows``);
    ``chain`` the steps that run one after another whatever the GPU's width (a chunked
    recurrence's chunks along one sequence, each waiting for the last one's state; a GEMM's
    k-loop, the reduction length summed over its kernels);
    ``engine_kernels`` 1 where a grouped GEMM runs in the kernel family its engine's path
    names (`KernelPath.moe_kernels`), else 0 (an expression: a Piecewise in the layout);
    ``experts`` the expert GEMMs a grouped GEMM's kernels run (the experts hit, summed over
    layers), each at its kernel family's fixed time per expert. The hardware plugin turns an
    Op into Terms.
    """

    name: str
    bytes: sp.Expr = attrs.field(
        converter=_sympified, validator=_dimension(INFORMATION, "op {attr}")
    )
    flops: sp.Expr = attrs.field(converter=_sympified, validator=_dimension(OPERATION, "op {attr}"))
    plugin: str
    why: str
    group: str
    kernels: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(DIMENSIONLESS, "op {attr}")
    )
    overlap: str = ""
    kind: str = attrs.field(default="gemm", validator=_text("op"))  # of the registry's op kinds
    precision: str = attrs.field(default="bf16", validator=_one_of("op precision", OP_PRECISIONS))
    rows: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(DIMENSIONLESS, "op {attr}")
    )
    serial_bytes: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(INFORMATION, "op {attr}")
    )
    counted_rows: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(DIMENSIONLESS, "op {attr}")
    )
    chain: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(DIMENSIONLESS, "op {attr}")
    )
    engine_kernels: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(DIMENSIONLESS, "op {attr}")
    )
    experts: sp.Expr = attrs.field(
        factory=_zero, converter=_sympified, validator=_dimension(DIMENSIONLESS, "op {attr}")
    )


COLLECTIVE_OPS = ("all_reduce", "all_to_all", "all_gather", "reduce_scatter", "send")


@attrs.frozen
class Collective:
    """A collective a parallel layout needs each step.

    ``op`` is all_reduce, all_to_all, all_gather, reduce_scatter, or send (point to point: a
    prompt's KV cache to a decode pool); ``group`` GPUs take part; ``size`` is the bytes each
    GPU contributes per call (an all-gather's or reduce-scatter's: the whole buffer gathered
    or reduced); ``count`` calls per step. ``inside``: of the group, how many ranks share a
    scale-up domain (placement: an EP group whose ranks are TP groups of a whole node has one
    rank per node); 0 means as many as the domain holds. An all-to-all may state ``reach``,
    the share of the group's other ranks each GPU messages per call (1: all), and ``across``,
    the bytes each GPU sends over the scale-out network per call (None: the share of ``size``
    bound for other domains; a dispatcher that sends once per destination node sends less).
    """

    name: str
    op: str = attrs.field()
    group: sp.Expr = attrs.field(
        converter=_sympified, validator=_dimension(DIMENSIONLESS, "collective {attr}")
    )
    size: sp.Expr = attrs.field(
        converter=_sympified, validator=_dimension(INFORMATION, "collective {attr}")
    )
    count: sp.Expr = attrs.field(
        converter=_sympified, validator=_dimension(DIMENSIONLESS, "collective {attr}")
    )
    plugin: str
    why: str
    overlap: str = ""
    inside: sp.Expr = attrs.field(
        factory=_zero,
        converter=_sympified,
        validator=_dimension(DIMENSIONLESS, "collective {attr}"),
    )
    reach: sp.Expr = attrs.field(
        factory=lambda: sp.S.One,
        converter=_sympified,
        validator=_dimension(DIMENSIONLESS, "collective {attr}"),
    )
    across: sp.Expr | None = attrs.field(
        default=None, converter=attrs.converters.optional(_sympified)
    )

    @op.validator
    def _known_op(self, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in COLLECTIVE_OPS:
            raise ValueError(f"collective {self.name}: unknown op {value!r}")


def _keys(keys: object) -> tuple[str, ...]:
    """A constraint's spec keys as a tuple (from any iterable of text, not one text)."""
    if isinstance(keys, str) or not isinstance(keys, Iterable):
        raise TypeError(f"constraint keys must be a tuple of spec keys, not {keys!r}")
    out = tuple(keys)
    if not all(isinstance(k, str) for k in out):
        raise TypeError(f"constraint keys must be a tuple of spec keys, not {keys!r}")
    return out


@attrs.frozen
class Constraint:
    """A relation a plugin's laws assume, e.g. ``n_dense_layers <= n_layers``.

    ``relation`` is a sympy relation (or And/Or of relations) over parameters; both sides of
    each comparison must have the same dimension (checked here). ``message`` says in words
    why it must hold; ``keys`` are the spec paths a user would change, the first is the one an
    error names. Constraints are evaluated like terms: at a point (eval refuses a violated
    one), vectorized (sweep's feasible mask) and along a key (derive's feasible region).
    """

    name: str = attrs.field(validator=_text("constraint"))
    relation: sp.Basic = attrs.field()
    message: str = attrs.field(validator=_text("constraint"))
    keys: tuple[str, ...] = attrs.field(converter=_keys)
    plugin: str = attrs.field(validator=_text("constraint"))
    labels: tuple[str, str] = ("", "")  # names for the two sides of a long comparison

    @relation.validator
    def _relation(self, attribute: attrs.Attribute[Any], rel: sp.Basic) -> None:
        kinds = (sp.core.relational.Relational, sp.logic.boolalg.BooleanFunction,
                 sp.logic.boolalg.BooleanAtom)  # fmt: skip
        if not isinstance(rel, kinds) or isinstance(rel, sp.Symbol):
            raise DimensionError(
                f"constraint relation must be a sympy relation, not {type(rel).__name__}",
                term=self.name,
                plugin=self.plugin,
            )
        try:
            symbols.dim(rel)
        except DimensionError as e:
            raise e.located(term=self.name, plugin=self.plugin) from None


@attrs.frozen
class Decoding:
    """What a decoding plugin decides: verify tokens per user M, accepted tokens τ, the
    drafting work per step as times on the reference engine (``host``: drafter forward, tree
    building; the engine's plugin turns them into terms at its own speed), and drafting the
    model plugin costs on the GPU like its own layers: ``draft_passes`` sequential passes of
    one token per user through ``draft_layers`` decoder layers and the LM head (an MTP
    module)."""

    verify_tokens: sp.Expr
    accepted_tokens: sp.Expr
    host: tuple[Term, ...] = ()
    draft_passes: sp.Expr = sp.S.Zero
    draft_layers: sp.Expr = sp.S.Zero


@attrs.frozen
class Layout:
    """How a replica is spread: TP and EP degrees, DP replicas, and users per attention rank;
    pipeline stages and their micro-batches; the prefill context-parallel degree."""

    tp: sp.Expr
    ep: sp.Expr
    dp: sp.Expr
    gpus_per_replica: sp.Expr
    users: sp.Expr  # users (concurrency) per replica
    users_per_attention_rank: sp.Expr
    imbalance: sp.Expr = sp.S.One  # load of the busiest EP rank over the mean
    redundant_experts: sp.Expr = sp.S.Zero  # extra expert replicas held (EPLB)
    uneven: bool = False  # degrees need not divide heads / experts (busiest rank sets time)
    pp: sp.Expr = sp.S.One  # pipeline stages, each tp·ep GPUs holding 1/pp of the layers
    microbatches: sp.Expr = sp.S.One  # micro-batches in flight through the stages
    pipelined: bool = False  # pp > 1: stages, micro-batches and their bubble are priced
    cp: sp.Expr = sp.S.One  # attention ranks a prompt prefilled alone is split over
    context_parallel: bool = False  # cp > 1: the split and its KV gather are priced


@attrs.frozen
class KernelPath:
    """How an engine's kernels run ops of math ``precision`` on the scenario's GPU family:
    on the tensor cores of ``runs_as`` (fp4 as bf16 on Hopper: W4A16, the weights streamed at
    their own bits and dequantised before the MMA), at ``factor`` times that roof's
    calibrated plateau efficiency (the calibrated library's time over this engine's), and at
    ``moe_factor`` times it in the routed experts' grouped GEMMs; ``moe_kernels`` names the
    GPU kernel family (`EXPERT_LIBRARIES`) its routed experts run in where an op says they do
    (`Op.engine_kernels`), "" for the GPU's own."""

    precision: str
    runs_as: str
    factor: sp.Expr = sp.S.One
    moe_factor: sp.Expr = sp.S.One
    moe_kernels: str = ""


@attrs.frozen
class Engine:
    """What the serving engine decides (the ``engine`` section's plugin): the kernels it
    launches per decoder layer besides the model's GEMMs, attention and experts (norms,
    RoPE, quantisation, top-k, residual adds: ``layer_kernels``); a factor on the hardware's
    kernel floors and on its kernels' serial steps (a GEMM's k-loop, a recurrence's chunk
    chain) for its kernel library (``floor_factor``: 1 for the reference library they were
    measured with, 0 for an estimator without floors) and one on the routed
    experts' activation traffic (``activation_factor``: 0 for an estimator of weights and
    FLOPs only); the fraction of HBM
    bandwidth its kernels stream at, where it states one (``memory_efficiency``, else the
    hardware's per kind of kernel); the host time added per
    kernel launch (``launch_overhead``: 0 under CUDA graphs) and per decoder layer of a
    forward pass it runs outside CUDA graphs, its prefill (``prefill_layer_host``: such a
    pass takes at least layers times this); and how it overlaps work:
    two-batch overlap of communication with compute (``two_batch_overlap``, with the share of
    the GPU the communication kernels take, ``comm_sm_fraction``), shared experts on a side
    stream during dispatch (``overlap_shared_experts``) or as one more routed expert of the
    fused MoE kernel (``fuse_shared_experts``), and the most prompt tokens one
    iteration prefills per attention rank in aggregated serving (``prefill_chunk``); the share
    of device memory it gives weights and the KV cache (``memory_fraction``); how its expert
    dispatch sends a token (``dispatcher``: once per chosen expert, once per destination rank,
    or ``auto``: per rank in prefill, per expert in decode); whether its memory fraction is of
    the memory the weights leave free (``memory_of_free``), and the tokens per block of its
    paged KV cache (``kv_block``); how it places prompts on attention-DP ranks
    (``prefill_placement``: ``round_robin`` or ``synchronised``, the latter holding a prompt at
    most ``balance_timeout`` iterations for every rank to have one) and whether prefill chunks ride
    in decode iterations (``prefill_schedule`` ``mixed``) or run in iterations of their own that
    stall decode (``interleaved``); how often its scheduler polls for new requests
    (``recv_interval`` decode iterations) and how many iterations it launches ahead of the GPU
    (``schedules_ahead``); an all-reduce law of its own inside a scale-up domain of the
    cluster's fabric where it states one (``allreduce``: (α, β) of α + 2(N−1)/N·S/β,
    replacing the domain's algorithms; the seed's estimator priced NVLink all-reduces so,
    BRIEF S11)."""

    layer_kernels: sp.Expr = sp.S.Zero
    floor_factor: sp.Expr = sp.S.One
    activation_factor: sp.Expr = sp.S.One
    launch_overhead: sp.Expr = sp.S.Zero
    prefill_layer_host: sp.Expr = sp.S.Zero  # host time per layer of a pass outside CUDA graphs
    memory_efficiency: sp.Expr | None = None  # overrides the hardware's per-kind efficiencies
    two_batch_overlap: bool = False
    comm_sm_fraction: sp.Expr = sp.S.Zero
    overlap_shared_experts: bool = False
    fuse_shared_experts: bool = False
    prefill_chunk: sp.Expr = attrs.field(factory=lambda: sp.Integer(8192))
    memory_fraction: sp.Expr = sp.S.One  # of device memory, for weights and KV cache
    overlap_efficiency: sp.Expr = sp.S.One  # two-batch overlap's hidden share of the shorter side
    # speculation under load: above draft_limit_batch users per attention rank, a draft chain
    # verifies at most draft_limit drafts (None: never limited)
    draft_limit_batch: sp.Expr | None = None
    draft_limit: int = 0
    kernel_paths: tuple[KernelPath, ...] = ()  # where its kernels differ from the roofs

    def kernel_path(self, precision: str) -> KernelPath:
        """How the engine runs ops of ``precision`` (as they are, at the calibrated roof,
        where it states no path)."""
        return next((k for k in self.kernel_paths if k.precision == precision),
                    KernelPath(precision, precision))  # fmt: skip

    dispatcher: str = "per_expert"  # expert dispatch: per_expert, per_rank or auto (by phase)
    memory_of_free: bool = False  # memory_fraction of what the weights leave free, not of all
    kv_block: sp.Expr = sp.S.One  # tokens per KV-cache block (page)
    prefill_placement: str = "round_robin"
    # synchronised placement: iterations a waiting prompt is held at most for every rank
    balance_timeout: sp.Expr = attrs.field(factory=lambda: sp.Integer(50))
    prefill_schedule: str = "mixed"
    recv_interval: int = 1  # decode iterations between the scheduler's polls for new requests
    schedules_ahead: int = 0  # iterations the scheduler launches ahead of the GPU (overlap: 1)
    allreduce: tuple[sp.Expr, sp.Expr] | None = None  # its own (α, β) inside a domain, if any


@attrs.frozen
class Step:
    """One forward pass the model is costed for. ``name``: ``decode`` or ``prefill`` for the
    scenario's own step, ``ttft`` for one prompt prefilled alone (time to first token).
    ``users`` per replica and ``users_per_rank`` on the busiest attention rank;
    ``tokens_per_user`` each user puts through the pass (M verify tokens, or the prompt);
    ``context`` tokens each user already holds in the KV cache; ``produced`` tokens each user
    gets from the pass (τ when decoding, the prompt when prefilling). In aggregated serving a
    decode iteration also prefills ``prefill_tokens`` prompt tokens per replica, of which the
    busiest attention rank takes ``prefill_tokens_rank``. ``kv_transfer`` prompt tokens whose
    KV cache is sent to a decode pool after the pass (disaggregated serving). ``completion``
    output tokens per request (OSL), for sizing a separate prefill pool. ``arrival_rate``:
    requests per second arriving at a replica (Poisson, open loop); None: a closed loop, each
    of the ``users`` requests replaced as soon as it finishes (`stepwall.model.queueing`).
    ``prefill_passes``: prefill passes of their own per decode iteration (an engine that
    interleaves prefill with decode runs them between decode iterations, every rank stepping
    together). ``prefill_share``: the share of iterations that carry those prompt tokens
    (`laws.prefill_iteration_share`); each of them carries ``prefill_tokens``/share, the
    others decode only, and the step is priced as that mixture. ``admission_wait``:
    iterations a prompt is held before its prefill may start (attention-DP balance,
    `laws.balance_window`), on top of any queue for the prefill capacity. ``prefill_piece``:
    the most tokens of one prompt such an iteration prefills (min(ISL, the chunk budget)), the
    longest sequence a chunked recurrence walks in it."""

    name: str
    users: sp.Expr
    users_per_rank: sp.Expr
    tokens_per_user: sp.Expr
    context: sp.Expr
    produced: sp.Expr
    prefill_tokens: sp.Expr = sp.S.Zero
    prefill_tokens_rank: sp.Expr = sp.S.Zero
    prefill_context: sp.Expr = sp.S.Zero  # mean tokens a prefilled prompt token attends to
    kv_transfer: sp.Expr = sp.S.Zero
    completion: sp.Expr = sp.S.One
    arrival_rate: sp.Expr | None = None
    prefill_passes: sp.Expr = sp.S.Zero
    prefill_share: sp.Expr = sp.S.One
    admission_wait: sp.Expr = sp.S.Zero  # iterations a prompt is held before its prefill
    prefill_piece: sp.Expr = sp.S.Zero  # the most tokens of one prompt in one iteration

    @property
    def tokens(self) -> sp.Expr:
        """Tokens through the replica's GEMMs in this pass: users·M plus prefill tokens."""
        return self.users * self.tokens_per_user + self.prefill_tokens

    @property
    def tokens_rank(self) -> sp.Expr:
        """Tokens through the busiest attention rank in this pass."""
        return self.users_per_rank * self.tokens_per_user + self.prefill_tokens_rank


@attrs.frozen
class Workload:
    """A model's per-GPU work for one step under a layout, its collectives and its memory.

    ``weight_parts`` splits ``weight_bytes_per_gpu`` by component (``routed_experts``,
    ``attention``, …) for plugins that place some of it elsewhere (host memory)."""

    ops: tuple[Op, ...]
    collectives: tuple[Collective, ...]
    weight_bytes_per_gpu: sp.Expr
    kv_bytes_per_gpu: sp.Expr
    layers: sp.Expr
    weight_parts: Mapping[str, sp.Expr] = attrs.field(factory=dict)
