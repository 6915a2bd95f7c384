"""The engine's answer, as data: its version and its flags (frozen, JSON round-trip)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping

FlagKind = Literal["bool", "value", "choice", "list"]


@dataclass(frozen=True)
class EngineFlag:
    """One flag as the engine's parser describes it.

    ``name`` is the engine-argument name (``max_num_batched_tokens``), ``spelling`` the long
    option (``--max-num-batched-tokens``); ``kind``: ``bool`` (a switch, ``negatable`` when
    ``--no-x`` exists), ``choice`` (``choices`` as the parser prints them), ``list`` (several
    values) or ``value``. ``default`` is the parser's default, parsed (``None``: decided at
    start); ``default_text`` as printed.
    """

    name: str
    spelling: str
    kind: FlagKind
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    negatable: bool = False
    default: Any = None
    default_text: str = ""
    group: str = ""


@dataclass(frozen=True)
class Installed:
    """What one engine installation answered.

    ``batch_defaults``: (max_num_batched_tokens, max_num_seqs) from the engine's own
    ``EngineArgs.get_batch_defaults`` for the API server, on the device it saw
    (``batch_device``, e.g. ``cpu`` or ``NVIDIA H200 139.8 GiB``); ``None`` when it could not
    say (no device, or an engine that does not expose it).
    """

    engine: str
    version: str
    flags: Mapping[str, EngineFlag] = field(default_factory=dict)
    batch_defaults: tuple[int, int] | None = None
    batch_device: str = ""

    @property
    def label(self) -> str:
        """``vllm 0.32.0+cpu``: how messages name the installation."""
        return f"{self.engine} {self.version}"

    def has(self, name: str) -> bool:
        return name in self.flags

    def only(self, names) -> "Installed":
        """The same answer, keeping the flags in ``names`` (what a study stores)."""
        names = set(names)
        keep = {n: f for n, f in self.flags.items() if n in names}
        return Installed(self.engine, self.version, keep, self.batch_defaults,
                         self.batch_device)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["flags"] = {n: asdict(f) for n, f in self.flags.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Installed":
        flags = {n: EngineFlag(**{**f, "aliases": tuple(f.get("aliases", ())),
                                  "choices": tuple(f.get("choices", ()))})
                 for n, f in data.get("flags", {}).items()}
        batch = data.get("batch_defaults")
        return cls(data["engine"], data["version"], flags,
                   tuple(batch) if batch else None, data.get("batch_device", ""))
