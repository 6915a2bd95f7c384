"""The study file schema (pydantic): what a user writes in ``studies/*.toml``.

The validated ``StudySpec`` is frozen and stored on the Optuna study itself (user
attribute ``tuner.spec``), so a worker on another host needs only the study's name and the
storage URL. Loading and error messages live in ``load.py``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, ValidationInfo, field_validator,
                      model_validator)

from tuner.spec.durations import duration_s
from tuner.limits import (MAX_DURATION_MS, MAX_DURATION_S, MAX_HEADS, MAX_REQUEST_RATE,
                          MAX_SEED, MAX_THROUGHPUT, MAX_TIME_SCALE, MAX_TOKENS, MAX_TRIALS,
                          MAX_VOCAB)
from tuner.loadgen.spec import Stopping, Workload


class _Section(BaseModel):
    # Every float is finite: inf and nan are no sizes, limits or values (tuner.limits).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ModelSection(_Section):
    """The model to serve: a local folder with config.json (and a tokenizer)."""

    path: str
    served_name: str | None = None
    dtype: Literal["auto", "bfloat16", "float16", "half", "float32"] = "auto"
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    # Read from the folder's config.json at study creation when not given.
    context_len: int | None = Field(None, ge=16, le=MAX_TOKENS)
    num_attention_heads: int | None = Field(None, ge=1, le=MAX_HEADS)
    vocab_size: int | None = Field(None, ge=16, le=MAX_VOCAB)


# Memory (GiB) of the GPUs we know by name; any other needs hardware.gpu_memory_gib.
GPU_MEMORY_GIB = {"h200": 139.8, "h100": 79.6, "a100-80g": 79.2, "l4": 22.0, "cpu": 0.0}


class HardwareSection(_Section):
    """Where the study runs: the GPU model (for vLLM's defaults and the simulator)."""

    # gpu_memory_gib comes first: the check of gpu reads it.
    gpu_memory_gib: float | None = Field(None, gt=0, le=4096)
    gpu: str = "h200"
    # GPU ids as `tuner worker --gpus` takes them (0..63 without nvidia-smi to ask).
    gpus: list[Annotated[int, Field(ge=0, le=63)]] = Field(default_factory=lambda: [0],
                                                           min_length=1)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("gpu_memory_gib") is None and v.lower() not in GPU_MEMORY_GIB:
            raise ValueError(f"unknown GPU {v!r}; known: {', '.join(GPU_MEMORY_GIB)}; "
                             "or give hardware.gpu_memory_gib for another GPU")
        return v

    @property
    def memory_gib(self) -> float:
        return self.gpu_memory_gib or GPU_MEMORY_GIB[self.gpu.lower()]


# The study file's [workload] is the load generator's one model of a workload: every field
# is declared there, once, and the simulator and the runner read it as it is.
WorkloadSection = Workload


METRICS = ("output_throughput", "request_throughput", "total_token_throughput", "goodput",
           "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
           "mean_itl_ms", "median_itl_ms", "p90_itl_ms", "p99_itl_ms",
           # Each arrival's gap divided among its tokens (tuner/loadgen/client.py): the ITL
           # to choose when the server sends several tokens a message (stream_interval > 1).
           "mean_itl_per_token_ms", "median_itl_per_token_ms", "p90_itl_per_token_ms",
           "p99_itl_per_token_ms",
           # Over the steady window of a closed-loop run (all clients busy; loadgen/window.py),
           # with a batch-means interval recorded on the trial: steadier than whole-run ones.
           "steady_output_throughput", "steady_p99_itl_ms", "steady_p99_itl_per_token_ms",
           "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms",
           "mean_e2el_ms", "median_e2el_ms", "p90_e2el_ms", "p99_e2el_ms",
           *("capacity_rps", "capacity_output_throughput", "reference_p99_itl_ms",
             "reference_p99_ttft_ms"))
# From the trial's load ladder ([capacity]): the highest request rate at which every SLO
# held and the output tokens/s there; the p99s measured at the study's reference rate.
CAPACITY_METRICS = ("capacity_rps", "capacity_output_throughput")
REFERENCE_METRICS = ("reference_p99_itl_ms", "reference_p99_ttft_ms")


class Objective(_Section):
    metric: str
    direction: Literal["maximize", "minimize"]
    # Value told for a configuration that fails to start (the study's worst acceptable
    # point); None: 0 for a maximised metric, the SLO limit or 1000 ms for a minimised one.
    worst: float | None = None

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in METRICS:
            raise ValueError(f"unknown metric {v!r}; choose one of: {', '.join(METRICS)}")
        return v


DEFAULT_OBJECTIVES = (Objective(metric="output_throughput", direction="maximize"),
                      Objective(metric="p99_itl_ms", direction="minimize"))
# A study file that sets a TTFT and an ITL limit asks the headline question: how much
# traffic within both SLOs, and the p99 ITL at the traffic it expects (``file_objectives``).
CAPACITY_OBJECTIVES = (Objective(metric="capacity_rps", direction="maximize"),
                       Objective(metric="reference_p99_itl_ms", direction="minimize"))
BOTH_LIMITS = ("p99_ttft_ms", "p99_itl_ms")


def file_objectives(doc: dict[str, Any]) -> dict[str, Any]:
    """A study file's document (parsed TOML) with the objectives it implies when it names
    none: ``CAPACITY_OBJECTIVES`` once its ``[slo]`` sets both ``BOTH_LIMITS``, else the
    document as it is (the schema's ``DEFAULT_OBJECTIVES`` apply). Only study files are
    read so: a spec built in code, or stored on a study, names its objectives itself."""
    slo = doc.get("slo")
    if "objectives" in doc or not isinstance(slo, dict) or not all(
            slo.get(k) is not None for k in BOTH_LIMITS):
        return doc
    return {**doc, "objectives": [o.model_dump(exclude_none=True)
                                  for o in CAPACITY_OBJECTIVES]}


# The least limits a study file may set (ms): smaller ones are seconds written in a _ms key.
MIN_SLO_MS, MIN_TTFT_MS = 1.0, 10.0


class SLOSection(_Section):
    """Service-level objectives, told to the sampler as constraints (<= limit), and
    floors (``min_*``)."""

    p99_itl_ms: float | None = Field(None, gt=0, le=MAX_DURATION_MS)
    p99_ttft_ms: float | None = Field(None, gt=0, le=MAX_DURATION_MS)
    p99_tpot_ms: float | None = Field(None, gt=0, le=MAX_DURATION_MS)
    p99_e2el_ms: float | None = Field(None, gt=0, le=MAX_DURATION_MS)
    # The accuracy guard's floor (tuner/accuracy/): token agreement with the default's
    # greedy completions, for trials with a lossy flag value; told as a constraint.
    min_token_agreement: float | None = Field(None, ge=0, le=1)
    # A floor on output tokens/s: the score's reference on the throughput side (points
    # below it add no hypervolume; tuner/trials/reference.py). Without it: half the
    # default's throughput. Not told to the sampler as a constraint.
    min_output_throughput: float | None = Field(None, gt=0, le=MAX_THROUGHPUT)

    @field_validator("p99_itl_ms", "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms")
    @classmethod
    def _in_milliseconds(cls, v: float | None, info: ValidationInfo) -> float | None:
        # Seen: p99_itl_ms = 0.04 (seconds in a _ms key) was accepted, and every trial
        # missed it. No token comes within 1 ms, no first token within 10 ms.
        least = MIN_TTFT_MS if info.field_name == "p99_ttft_ms" else MIN_SLO_MS
        if v is not None and v < least:
            raise ValueError(f"{info.field_name} = {v:g}: the limit is in milliseconds, and "
                             f"under {least:g} ms no server meets it; if you meant {v:g} s, "
                             f"write {v * 1000:g}")
        return v

    def limits(self) -> dict[str, float]:
        """Upper limits by metric (constraints: value <= limit)."""
        return {k: v for k, v in self.model_dump().items()
                if v is not None and not k.startswith("min_")}

    def floors(self) -> dict[str, float]:
        """Lower bounds by metric (``min_output_throughput`` -> output_throughput)."""
        return {k.removeprefix("min_"): v for k, v in self.model_dump().items()
                if v is not None and k.startswith("min_") and k != "min_token_agreement"}


class CapacitySection(_Section):
    """The load ladder (``tuner.capacity``): after the saturated benchmark, on the same
    server, open-loop levels of Poisson arrivals that bracket, then bisect, the highest
    request rate at which every SLO holds. On with ``ladder = true``, or implied by a
    capacity or reference objective."""

    ladder: bool = False
    # The traffic you expect (requests/s): the ladder's first level, measured as it is,
    # whose p99s are the reference_* metrics.
    reference_rate: float | None = Field(None, gt=0, le=MAX_REQUEST_RATE)
    tolerance: float = Field(0.05, gt=0, lt=1)   # the bracket's relative width at the end
    max_levels: int = Field(6, ge=1, le=50)
    level_s: float = Field(60.0, gt=0, le=MAX_DURATION_S)  # arrivals per level (server time)


# How long one trial's benchmark runs: the load generator's early stop, as it is.
MeasurementSection = Stopping


class RangeOverride(_Section):
    low: float | None = None
    high: float | None = None
    log: bool | None = None
    choices: list[Any] | None = None


class SpaceSection(_Section):
    rules: Literal["article", "vllm-v1"] = "article"
    ranges: dict[str, RangeOverride] = Field(default_factory=dict)
    fixed: dict[str, Any] = Field(default_factory=dict)
    exclude: list[str] = Field(default_factory=list)
    # Flags whose lossy values (tuner/numerics.py) the study opts in to; without
    # them the space is lossless: those values are never proposed, fixed or ranged.
    lossy: list[str] = Field(default_factory=list)
    # Budgets, sequence counts and model lengths on a log-spaced grid, so that vLLM's compile
    # cache can hit (tuner/space/compile_grid.py). Off by default: with several workers the
    # coarser space let two trials that ran at once run the same flags.
    compile_grid: bool = False


DEFAULT_MIN_TOKEN_AGREEMENT = 0.97


class AccuracySection(_Section):
    """The accuracy guard (tuner/accuracy/): the default baseline's greedy completions of
    a fixed prompt set are the reference; every trial with a lossy flag value replays them."""

    prompts: int = Field(32, ge=1, le=1024)
    max_tokens: int = Field(64, ge=1, le=4096)


class SearchSection(_Section):
    sampler: Literal["auto", "front", "tpe", "gp", "botorch", "nsga2", "random"] = "auto"
    n_trials: int = Field(20, ge=1, le=MAX_TRIALS)
    seed: int | None = Field(0, ge=0, le=MAX_SEED)
    baselines: bool = True
    repeats: bool = False
    # Confirmation runs (tuner/runner/confirm.py): the default and every trial whose first run
    # lands on the front are benchmarked this many more times on the same server; the trial
    # tells the medians and keeps every run and their spread.
    confirm: int = Field(0, ge=0, le=20)
    # The default baseline's own count (None: confirm): every gain is measured against it,
    # so a study may give it more runs than the front points.
    confirm_default: int | None = Field(None, ge=0, le=20)
    # Each worker that starts on a study whose default is already measured first runs the
    # default again (baseline "reference"; it spends a trial of the budget), so that a
    # study over several windows or hosts records each one's speed (tuner/trials/drift.py;
    # `tuner status` shows each reference run against the default).
    reference_runs: bool = False
    # Stopping rules beside n_trials (tuner/runner/stopping.py): no new trial after the
    # deadline (a time, "2026-12-01T08:00", in the worker's local time unless it has an
    # offset, or a duration from `tuner launch`, "8h"), nor once the hypervolume has not
    # improved for `patience` finished trials.
    deadline: str | None = None
    patience: int | None = Field(None, ge=1, le=MAX_TRIALS)

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, v: str | None) -> str | None:
        import datetime

        if v is None or duration_s(v) is not None:
            return v
        try:
            datetime.datetime.fromisoformat(v)
        except ValueError:
            raise ValueError(f"not a time or a duration: {v!r}; give e.g. "
                             "'2026-12-01T08:00' or '8h'") from None
        return v


class EngineSection(_Section):
    """How the server is started on the worker's host."""

    kind: Literal["vllm", "sim"] = "vllm"
    python: str = "python3"
    module: str | None = None
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    extra_args: list[str] = Field(default_factory=lambda: ["--load-format", "dummy"])
    # "preimported": fork each server from a per-slot process that imported vLLM once
    # (docs/starts.md); "plain": spawn `python -m ...` afresh.
    start: Literal["plain", "preimported"] = "plain"
    start_timeout_s: float = Field(900.0, gt=0, le=MAX_DURATION_S)
    stop_grace_s: float = Field(20.0, ge=0, le=MAX_DURATION_S)
    # A benchmark that has not finished by then is a hang (the server is stopped).
    benchmark_timeout_s: float = Field(1800.0, gt=0, le=MAX_DURATION_S)
    # A worker's first N launched trials also run `vllm bench serve` on the same server
    # and workload, and store its figures beside ours (see tuner/runner/crosscheck.py).
    crosscheck_trials: int = Field(0, ge=0, le=MAX_TRIALS)
    # How many times `vllm bench serve` runs on each of those servers, back to back: more
    # than one gives vLLM's own run-to-run spread beside the difference between clients
    # (beside a ladder: rounds of our level then vLLM's run at each bracketing rate).
    crosscheck_repeats: int = Field(1, ge=1, le=10)
    time_scale: float = Field(1.0, gt=0, le=MAX_TIME_SCALE)


# A study name is also a folder name under $TUNER_HOME/studies: no '/', no leading '.'.
STUDY_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


def is_study_name(name: str) -> bool:
    return re.fullmatch(STUDY_NAME, name) is not None


class StudySpec(_Section):
    """A whole study file, validated."""

    name: str = Field(pattern=STUDY_NAME)
    description: str = ""
    model: ModelSection
    hardware: HardwareSection = HardwareSection()
    workload: WorkloadSection = WorkloadSection()
    objectives: list[Objective] = Field(default_factory=lambda: list(DEFAULT_OBJECTIVES))
    slo: SLOSection = SLOSection()
    measurement: MeasurementSection = MeasurementSection()
    space: SpaceSection = SpaceSection()
    accuracy: AccuracySection = AccuracySection()
    search: SearchSection = SearchSection()
    engine: EngineSection = EngineSection()
    capacity: CapacitySection = CapacitySection()

    @field_validator("objectives")
    @classmethod
    def _two(cls, v: list[Objective]) -> list[Objective]:
        if not v:
            raise ValueError("give at least one objective")
        if len({o.metric for o in v}) != len(v):
            raise ValueError("each objective metric may appear once")
        return v

    @model_validator(mode="after")
    def _engine_kind_fields(self) -> "StudySpec":
        if self.engine.kind == "vllm" and self.engine.time_scale != 1.0:
            raise ValueError("engine.time_scale is for the simulator only (kind = 'sim')")
        if self.engine.kind == "sim" and self.engine.env:
            # The simulator reads none, and its server is a Python that would honour them.
            raise ValueError("engine.env is for vLLM only: the simulator (kind = 'sim') "
                             "takes no environment")
        if self.engine.kind == "sim" and self.engine.start != "plain":
            raise ValueError("engine.start = 'preimported' is for vLLM only: the simulator "
                             "(kind = 'sim') always starts plainly")
        return self

    @model_validator(mode="after")
    def _capacity_fields(self) -> "StudySpec":
        metrics = {o.metric for o in self.objectives}
        if self.measures_capacity and not (self.slo.p99_itl_ms or self.slo.p99_ttft_ms):
            raise ValueError("a load ladder needs an SLO to hold: set slo.p99_itl_ms and/or "
                             "slo.p99_ttft_ms")
        if self.measures_capacity and (self.search.confirm or self.search.confirm_default):
            raise ValueError("search.confirm does not apply to a load-ladder study: the "
                             "ladder repeats the levels next to the edge itself, and the "
                             "capacity's interval is its noise; remove search.confirm "
                             "(and confirm_default)")
        if metrics & set(REFERENCE_METRICS) and self.capacity.reference_rate is None:
            raise ValueError("a reference_* objective needs capacity.reference_rate (the "
                             "requests/s you expect; a study file with p99_ttft_ms and "
                             "p99_itl_ms gets one unless it names its [[objectives]])")
        return self

    @property
    def measures_capacity(self) -> bool:
        """Whether each trial runs the load ladder after its benchmark."""
        return self.capacity.ladder or any(
            o.metric in CAPACITY_METRICS + REFERENCE_METRICS for o in self.objectives)

    @property
    def accuracy_limit(self) -> float | None:
        """The accuracy guard's floor on token agreement: ``slo.min_token_agreement``, else
        DEFAULT_MIN_TOKEN_AGREEMENT once the study opts in to a lossy flag; None for a
        lossless study (nothing to guard)."""
        if not self.space.lossy:
            return None
        limit = self.slo.min_token_agreement
        return DEFAULT_MIN_TOKEN_AGREEMENT if limit is None else limit

    def worst_value(self, objective: Objective) -> float:
        """What a configuration that fails to start is told for ``objective``."""
        if objective.worst is not None:
            return objective.worst
        if objective.direction == "maximize":
            return 0.0
        key = objective.metric.replace("median_", "p99_").replace("mean_", "p99_")
        return self.slo.limits().get(key, 1000.0)
