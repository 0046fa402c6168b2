"""What `nexus eval` is asked to do: the ks, the depth, how turns are merged, what to
write, and the settings every turn starts from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings


@dataclass(frozen=True)
class EvalOptions:
    ks: Sequence[int] = (5, 10, 20)
    depth: int | None = None
    turns_per_episode: int = 1
    json_out: Path | None = None
    plot_out: Path | None = None
    learned: bool = True
    keyword_budget: int = 0
    time_aware: str = "off"
    kept_vectors: bool = True  # each text's vector read back from earlier runs

    def base(self) -> RuntimeSettings:
        """The settings every turn starts from (each run sets its weights and limit)."""
        return replace(DEFAULTS, keyword_budget=self.keyword_budget, time_aware=self.time_aware)
