"""Pipeline parallelism as vLLM lays it out: the layers split into stages (vllm/distributed/utils.py get_pp_indices,
or VLLM_PP_LAYER_PARTITION), each stage a worker with its own weights, activation peak and KV blocks, and every
worker's num_blocks the minimum over the workers (the executor's min over determine_num_available_blocks).

The embeddings live on the first stage, the final norm and the output head on the last; a tied head is a copy of the
embedding on the last stage (vLLM's ParallelLMHead there loads the embedding's weights), so with more than one stage
both hold it. A stage's KV depends on which layers it holds: the model is partitioned by layer index and each stage's
kinds (full, sliding, chunked, state) are counted from the model's per-layer pattern.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attncore.checks import ConfigError, check_int
from serving import engine
from serving.context_limit import ContextLimit
from serving.engine import EngineSettings
from serving.kvcache import DTYPE_BITS, weight_bytes
from serving.parameters import Decoder, count_parameters, param_inventory
from serving.weights import WeightFormat, stored_weights

WINDOWED = ("sliding", "chunked")
DEFAULT_SETTINGS = engine.EngineSettings()


def default_partition(n_layers: int, pp: int) -> tuple[int, ...]:
    """get_pp_indices without VLLM_PP_LAYER_PARTITION: n_layers // pp layers each, the remainder one each to the
    stages from the second-to-last backwards (the last stage holds the final norm and head, the first the
    embeddings)."""
    check_int("pipeline_parallel_size", pp, 1, n_layers)
    parts = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def partition(n_layers: int, pp: int, given: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The layers of each stage: `given` (VLLM_PP_LAYER_PARTITION, checked as vLLM checks it: one count per stage,
    summing to the layers; here each at least 1) or the default split."""
    if given is None:
        return default_partition(n_layers, pp)
    check_int("pipeline_parallel_size", pp, 1, n_layers)
    given = tuple(given)
    if len(given) != pp:
        raise ConfigError("pp_layer_partition", f"must give {pp} layer counts (one per stage), got {len(given)}")
    for n in given:
        check_int("pp_layer_partition", n, 1, n_layers)
    if sum(given) != n_layers:
        raise ConfigError("pp_layer_partition", f"must sum to the model's {n_layers} layers, got {sum(given)}")
    return given


def with_pattern(a: Decoder, pattern: tuple[str, ...] | None) -> Decoder:
    """`a` with a config.json's per-layer attention pattern (hf_fields.ModelFile.layer_kinds) when it has none of its
    own: where its windowed layers sit decides which stage holds them."""
    if a.layer_kinds or not pattern or len(pattern) != a.n_layers or not a.sliding_window:
        return a
    return replace(a, layer_kinds=tuple(pattern))


def layer_kinds(a: Decoder) -> tuple[str, ...]:
    """Each layer's kind in order: the model's own pattern (Decoder.layer_kinds), else from its counts with the full
    layers spread evenly, layer i full when (i + 1)·full // n passes a whole number (Gemma 2's alternation and Gemma
    3's one in six when the layers are a multiple of six: a global layer closes each group); an assumption, said in
    docs/serving.md, only for a model typed by its counts."""
    if a.layer_kinds:
        return a.layer_kinds
    n, windowed = a.n_layers, a.windowed_layers
    full = n - windowed
    return tuple("full" if (i + 1) * full // n > i * full // n else a.window_kind for i in range(n))


def stage_model(a: Decoder, start: int, end: int) -> Decoder:
    """The decoder of layers [start, end): its pattern, its dense first layers and its state mixer, if any."""
    kinds = layer_kinds(a)[start:end]
    windowed = sum(k in WINDOWED for k in kinds)
    dense = max(0, min(end, a.n_dense_layers) - start) if a.n_experts else a.n_dense_layers
    return replace(
        a, n_layers=end - start, full_layers=end - start - windowed if a.sliding_window else 0, n_dense_layers=dense,
        layer_kinds=kinds if a.layer_kinds else (), mixer=a.mixer if "state" in kinds else None,
    )  # fmt: skip


def outside_tensors(a: Decoder) -> list:
    """The tensors outside the blocks (embeddings, positions, final norm, head)."""
    one = replace(a, n_layers=1, full_layers=0, n_dense_layers=0, layer_kinds=(), mixer=None)
    return [t for t in param_inventory(one) if not t.name.startswith("blocks.")]


def stage_params(a: Decoder, stage: Decoder, first: bool, last: bool, pp: int) -> tuple[int, int]:
    """(parameters the stage holds, of which outside the blocks): its blocks, the embeddings and learned positions
    on the first stage, the final norm and head on the last, and there a copy of a tied embedding when pp > 1."""
    outside = 0
    for t in outside_tensors(a):
        if t.name in ("tok_emb", "pos_emb"):
            outside += t.size if first else 0
            if t.name == "tok_emb" and a.tied_embeddings and last and not first:
                outside += t.size
        elif last:
            outside += t.size
    return sum(count_parameters(stage).per_layer) + outside, outside


def stage_bytes(a: Decoder, stage: Decoder, params: int, outside: int, f: WeightFormat) -> int:
    """The stage's stored bytes in format f: blocks quantised as f says, the tensors outside in its element type."""
    if f.method == "none":
        return weight_bytes(params, f.dtype)
    b = DTYPE_BITS[f.dtype] // 8  # a quantised checkpoint keeps the tensors outside the blocks in 8 to 32 bits
    return stored_weights(stage, f).bytes - sum(t.size for t in outside_tensors(a)) * b + outside * b


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: layers [start, end), what else it holds, and its worker's own engine fit."""

    index: int
    start: int
    end: int
    kinds: dict  # layer kind -> layers of this stage
    embeddings: bool
    head: bool
    params: int
    stored_bytes: int  # the stage's weights over its tensor-parallel ranks
    fit: engine.EngineFit  # one worker of this stage (bytes per GPU)

    def to_dict(self) -> dict:
        f = self.fit
        return {
            "stage": self.index, "layers": [self.start, self.end], "n_layers": self.end - self.start,
            "kinds": self.kinds, "embeddings": self.embeddings, "head": self.head, "params": self.params,
            "weights_bytes": f.weights_bytes, "activation_bytes": f.activation_bytes, "kv_bytes": f.kv_bytes,
            "page_bytes": f.page_bytes, "group_size": f.group_size, "num_blocks": f.num_blocks,
            "starts": f.starts, "error": f.error,
        }  # fmt: skip


@dataclass(frozen=True)
class PipelineFit:
    """The engine over pp stages of tp GPUs each: every worker keeps the fewest blocks any worker has."""

    pipeline_parallel_size: int
    tensor_parallel_size: int
    partition: tuple[int, ...]
    stages: tuple[Stage, ...]
    num_blocks: int  # min over the stages
    bottleneck: int  # the stage with the fewest blocks
    tokens: int
    concurrency: float
    starts: bool
    error: str | None  # the first stage's error that does not start, prefixed with the stage
    kind: str  # exact, measured or estimate: the least sure of the stages' block counts

    @property
    def gpus(self) -> int:
        return self.pipeline_parallel_size * self.tensor_parallel_size

    def to_dict(self) -> dict:
        return {
            "pipeline_parallel_size": self.pipeline_parallel_size, "tensor_parallel_size": self.tensor_parallel_size,
            "gpus": self.gpus, "partition": list(self.partition), "num_blocks": self.num_blocks,
            "bottleneck_stage": self.bottleneck, "tokens": self.tokens, "concurrency": self.concurrency,
            "starts": self.starts, "error": self.error, "kind": self.kind,
            "pipeline_stages": [s.to_dict() for s in self.stages],
        }  # fmt: skip


def pipeline_fit(
    a: Decoder,
    total_gib: float,
    s: EngineSettings = DEFAULT_SETTINGS,
    *,
    pp: int = 1,
    layer_partition: tuple[int, ...] | None = None,
    weights: WeightFormat | None = None,
    model_dtype: str = "bf16",
    gpu: str | None = None,
    limit: ContextLimit | None = None,
) -> PipelineFit:
    """Fit model `a` over pp stages of s.tensor_parallel_size GPUs each (total_gib each). Each stage is fitted as
    its own worker (engine.engine_fit on its layers, with its share of the weights stored as `weights`, the
    sampler on the last stage only); num_blocks is the least of the stages', and the tokens and concurrency follow
    from it with each stage's own blocks per request (the least of them)."""
    if s.weights_gib is not None and pp > 1:
        raise ConfigError("weights_gib", "is one worker's figure; with pipeline stages each loads its own layers")
    parts = partition(a.n_layers, pp, layer_partition)
    weights = weights or WeightFormat(dtype=model_dtype)
    stages, start = [], 0
    for i, n in enumerate(parts):
        end, first, last = start + n, i == 0, i == pp - 1
        model = stage_model(a, start, end) if pp > 1 else a
        params, outside = stage_params(a, model, first, last, pp) if pp > 1 else (count_parameters(a).total, 0)
        stored = stage_bytes(a, model, params, outside, weights) if pp > 1 else stored_weights(a, weights).bytes
        settings = replace(s, pipeline_parallel_size=pp, samples=last)
        fit = engine.engine_fit(
            model, total_gib, settings, weight_dtype=weights.dtype, model_dtype=model_dtype, gpu=gpu,
            weight_params=params, weight_bytes_given=stored, weight_label=weights.label, limit=limit, advise=False,
        )  # fmt: skip
        kinds = layer_kinds(a)[start:end]
        counted = {k: kinds.count(k) for k in ("full", "sliding", "chunked", "state") if k in kinds}
        stages.append(Stage(i, start, end, counted, first, last, params, stored, fit))
        start = end
    blocks = min(st.fit.num_blocks for st in stages)
    bottleneck = min(range(pp), key=lambda i: stages[i].fit.num_blocks)
    bs = s.block_size

    def tokens_of(f: engine.EngineFit) -> int:
        return blocks * bs if f.version == "v0" else blocks // sum(n for _, n in f.groups) * bs

    tokens = min(tokens_of(st.fit) for st in stages)
    concurrency = min(blocks / st.fit.blocks_per_request for st in stages)
    failing = [st for st in stages if not st.fit.starts]
    error = f"stage {failing[0].index} (layers {failing[0].start}-{failing[0].end - 1}): {failing[0].fit.error}" if (
        failing) else None  # fmt: skip
    kind = engine.worst(*(st.fit.kinds["blocks"] for st in stages))
    return PipelineFit(pp, s.tensor_parallel_size, parts, tuple(stages), blocks, bottleneck, tokens, concurrency,
                       not failing, error, kind)  # fmt: skip
