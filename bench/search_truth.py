"""The ground truth of the search benchmark: the simulator's offline evaluator, a cache of
its outcomes, the grid over each profile's space and the best known Pareto front.

Only this module (the harness) imports the simulator; the samplers learn from told trials.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tuner.sim import SimWorkload, evaluate, load_gpu, load_shape
from tuner.sim.workload import from_study
from tuner.space import SearchSpace, baselines, build_space
from tuner.spec import StudySpec
from tuner.storage import load_study_file
from tuner.trials import record
from tuner.trials.hypervolume import hypervolume
from tuner.trials.reference import study_rule

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TUNER_SEARCH_CACHE",
                           Path.home() / ".cache" / "tuner-bench-search"))
MODELS = {"llama3-8b-h200": "studies/models/llama3-8b",  # their files name a GPU-box path
          "llama3-8b-h100-capacity": "studies/models/llama3-8b"}
PROFILES = ("llama3-8b-h200", "chat-shared-prefix-h200", "llama3-70b-tp2-h200")
# Profiles no design choice or constant of the default sampler was chosen on, reported apart
HELD_OUT = ("llama3-8b-h200-summarise", "llama3-8b-h200-longgen",
            # added after the design choices of docs/decisions/0001-0008 (decision 0009)
            "llama3-70b-tp2-h200-chat", "llama3-8b-h200-burst")
RULE_SETS = ("article", "vllm-v1")
# The cache is keyed by the simulator's source: a changed model never reuses old outcomes
MODEL_SOURCES = ("tuner/sim/*.py", "tuner/sim/profiles.toml", "tuner/space/defaults.py")

# The grid (the Python API of tuner.sim over the study's space; max-model-len the
# workload's need): 9 x 2 x 2 x 2 x 7 x 2 = 1,008 points per profile (the other flags at
# vLLM's defaults); the best known front adds every configuration any run measured
GRID_AXES: dict[str, tuple[Any, ...]] = {
    "max_num_batched_tokens": (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    "max_model_len": ("min",),
    "gpu_memory_utilization": (0.85, 0.95),
    "enable_prefix_caching": (False, True),
    "enable_chunked_prefill": (False, True),
    "max_num_seqs": (8, 16, 32, 64, 128, 256, 1024),
    "kv_cache_dtype": ("auto", "fp8"),
}


@dataclass(frozen=True)
class Profile:
    name: str
    rules: str
    spec: StudySpec
    space: SearchSpace
    workload: SimWorkload

    @property
    def key(self) -> str:
        return f"{self.name}/{self.rules}"


def load_profile(name: str, rules: str) -> Profile:
    spec = load_study_file(ROOT / "studies" / f"{name}.toml")
    model = spec.model.model_copy(update={"path": str(ROOT / MODELS.get(name, spec.model.path))})
    space_sec = spec.space.model_copy(update={"rules": rules})
    spec = spec.model_copy(update={"model": model, "space": space_sec})
    workload = from_study(spec.workload)  # the study file's workload
    return Profile(name, rules, spec, build_space(spec), workload)


class Truth:
    """Outcomes of one profile's configurations (the rule set does not change them),
    memoised in memory and on disk (``CACHE``)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.shape = load_shape(profile.spec.model.path)
        self.gpu = load_gpu(profile.spec.hardware.gpu)
        self.path = CACHE / (f"{profile.name}-n{profile.workload.num_requests}"
                             f"-{model_version()}.json")
        self.known: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            self.known = json.loads(self.path.read_text())
        self.new: dict[str, dict[str, Any]] = {}

    def outcome(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """{"started", "failure", "output_throughput", "p99_itl_ms", "p99_ttft_ms",
        "server"}: the server's view as the load generator reads it from ``/metrics``."""
        key = record.flags_key(flags)
        hit = self.known.get(key)
        if hit is None:
            o = evaluate(dict(flags), self.shape, self.gpu, self.profile.workload)
            hit = {"flags": dict(flags), "started": o.started, "failure": o.failure_kind,
                   "output_throughput": o.output_throughput,
                   "p99_itl_ms": o.p99_itl_ms if o.started else None,
                   "p99_ttft_ms": o.p99_ttft_ms if o.started else None,
                   "server": server_view(o) if o.started else None}
            self.known[key] = self.new[key] = hit
        return hit

    def merge(self, entries: Mapping[str, dict[str, Any]]) -> None:
        self.known.update(entries)
        self.new.update(entries)

    def save(self) -> None:
        if self.new:
            save_outcomes(self.path, self.known)
            self.new = {}


def save_outcomes(path: Path, known: Mapping[str, Any]) -> None:
    """Add ``known`` to the cache file ``path`` (written whole, then moved into place)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    on_disk = json.loads(path.read_text()) if path.is_file() else {}
    on_disk.update(known)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(on_disk))
    tmp.replace(path)


def server_view(o) -> dict[str, float]:
    """What the load generator reads from a server's ``/metrics`` over a run
    (``tuner.loadgen.prometheus.server_view``), from a simulated outcome: its counters'
    deltas and its gauges' peaks (the prefix cache's counters as a rate: queries 1, hits
    the hit rate; the sampler reads their ratio)."""
    return {"preemptions": float(o.preemptions),
            "prefix_cache_queries": 1.0 if o.flags.get("enable_prefix_caching") else 0.0,
            "prefix_cache_hits": float(o.prefix_cache_hit_rate)
            if o.flags.get("enable_prefix_caching") else 0.0,
            "kv_cache_usage_peak": float(o.peak_kv_usage),
            "running_peak": float(o.peak_running)}


def model_version() -> str:
    """A hash of what the simulator's source files (``MODEL_SOURCES``) do: the cache's key.

    Docstrings and comments are left out (``source_digest``), so an edit to the prose keeps
    the key and the cached outcomes and merged runs (``make bench-search --merge``) with it;
    any change to code or to a TOML value makes a new key."""
    h = hashlib.sha256()
    for pattern in MODEL_SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + source_digest(path))
    return h.hexdigest()[:12]


def source_digest(path: Path) -> bytes:
    """What a source file does, as bytes: a ``.py`` file's syntax tree without docstrings
    (comments never reach the tree), a ``.toml`` file's parsed data (comments dropped, values
    kept in file order), any other file as it is."""
    text = path.read_text()
    if path.suffix == ".py":
        return json.dumps(_tree(_without_docstrings(ast.parse(text)))).encode()
    if path.suffix == ".toml":
        return json.dumps(tomllib.loads(text), default=str).encode()
    return text.encode()


def _without_docstrings(tree: ast.Module) -> ast.Module:
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if isinstance(node, scopes) and node.body and _is_docstring(node.body[0]):
            del node.body[0]
    return tree


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _tree(node: Any) -> Any:
    """A syntax tree as plain lists: node types and fields, no line numbers; empty fields
    left out, so the fields a newer Python adds (``type_params``, ...) keep the digest."""
    if node is None:
        return None
    if isinstance(node, ast.AST):
        fields = ((name, _tree(getattr(node, name, None))) for name in node._fields)
        return [type(node).__name__, [[n, v] for n, v in fields if v not in (None, [])]]
    if isinstance(node, list):
        return [_tree(x) for x in node]
    return repr(node)


def grid_flags(profile: Profile) -> list[dict[str, Any]]:
    """Every grid point as complete flags; points the rule set would move are left out
    (the rules' repair maps them onto other points)."""
    space = profile.space
    lens = {"min": space.param("max_model_len").low if space.param("max_model_len")
            else space.fixed["max_model_len"], "max": space.context.model_max_len}
    names = list(GRID_AXES)
    out = []
    for combo in itertools.product(*(GRID_AXES[n] for n in names)):
        flags = {**{k: space.defaults[k] for k in space.names}, **space.fixed}
        for n, v in zip(names, combo):
            if n in space.fixed:
                continue
            flags[n] = lens[v] if n == "max_model_len" else v
        if not space.rules.violations(flags, space.context) and space.contains(flags):
            out.append(flags)
    return out


def point(o: Mapping[str, Any]) -> tuple[float, float] | None:
    """The minimised objective vector of a started outcome (-tokens/s, p99 ITL ms)."""
    if not o["started"] or o["p99_itl_ms"] is None or not math.isfinite(o["p99_itl_ms"]):
        return None
    return (-o["output_throughput"], o["p99_itl_ms"])


def default_outcome(truth: Truth) -> dict[str, Any]:
    b = next(b for b in baselines(truth.profile.space) if b.name == "default")
    return truth.outcome(b.flags)


def whole_front_reference(truth: Truth) -> tuple[float, float]:
    """The study's score reference (``tuner.trials.reference``: the ITL SLO or twice the
    default's, the floor or half the default's throughput), minimised."""
    d = default_outcome(truth)
    values = (d["output_throughput"], d["p99_itl_ms"]) if d["started"] else None
    thr, itl = study_rule(truth.profile.spec).point(values)
    return (-thr, itl)


def front_volume(points: list[tuple[float, float]], reference: tuple[float, float]) -> float:
    """The hypervolume of ``points`` (minimised pairs), from their Pareto front only (the
    exact slicing is quadratic in the points it gets)."""
    front, best = [], math.inf
    for p in sorted(set(points)):
        if p[1] < best:
            front.append(p)
            best = p[1]
    return hypervolume(front, reference)
