"""A turn's plan: everything the settings, the fusion mode and the sources decide about
it, before any I/O. Pure, so that what a turn will do can be read (and tested) without a
store or a model: the filter after `timeAware`, the sources asked and how deep, whether
the message is embedded, each fused source's weight, the packer and the order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from nexusai.models import EpisodeFilter, to_utc_text
from nexusai.orchestration.modes import FusionMode
from nexusai.orchestration.packing import PACKERS, Packer, Packing, Stage, packing_for
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.turn.request import TurnRequest
from nexusai.orchestration.turn.sources import SOURCES, Source
from nexusai.timewords import TimeWindow, asks_for_order, named_window


@dataclass(frozen=True, kw_only=True)
class TurnPlan:
    request: TurnRequest
    settings: RuntimeSettings
    mode: FusionMode
    rule: EpisodeFilter | None  # the request's, narrowed to the time its message names
    window: TimeWindow | None  # that time (timeAware), or None
    depth: int  # rows each leg is asked for
    headroom: int | None  # rows the keyword leg asks past `depth` (None: the spec's, depth)
    sources: tuple[Source, ...]  # the sources asked, in the order fusion sums them
    weights: dict[str, float]  # each fused source's weight (RRF reads them)
    embed: bool  # whether the message is embedded here (not given, and something reads it)
    pool: int  # how many memories fusion gives packing
    # A budgeted turn's packing stages (`packing.stages`; each shallower list is fused too,
    # so that what a smaller budget gives this one gives; the last is the turn's own) and
    # its excerpts' length.
    packing: Packing
    # How a budgeted turn packs what fusion gives: the mode's packer, or one given (the
    # eval's, fitted without the question's conversation).
    packer: Packer
    order: str  # the memories' order: "rank" or "time" (`memoryOrder`, "auto" resolved)

    @property
    def message(self) -> str:
        return self.request.message

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self.packing.stages

    @property
    def zone(self) -> tzinfo | None:
        """The turn's own time zone, its `now`'s offset: the prompt's days are the user's
        (UTC when the request gives no time, or one without an offset)."""
        now = self.request.now
        return None if now is None else now.tzinfo

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the sources asked, in order."""
        return tuple(source.name for source in self.sources)

    def source(self, name: str) -> Source:
        """The source of that name the turn asks."""
        return next(source for source in self.sources if source.name == name)

    def fused(self) -> tuple[str, ...]:
        """The names of the sources asked that fusion reads, in the order it sums them."""
        return tuple(source.name for source in self.sources if source.name in self.weights)

    def warnings(self, embedder: str) -> list[str]:
        """What the turn says of its settings before it searches (`embedder`: the name of
        the one that embeds the message)."""
        return self.mode.warnings(embedder, self.weights)


def plan(
    settings: RuntimeSettings,
    request: TurnRequest,
    mode: FusionMode,
    sources: Sequence[Source] = SOURCES,
    packer: Packer | None = None,
) -> TurnPlan:
    """The turn as these settings and this mode would run it, from `sources` (`SOURCES`,
    or a table with another beside them), packed by `packer` (the mode's when None)."""
    rule, window = within_named_time(settings, request.message, request.now, request.rule)
    packing = budget_packing(settings, request.message)
    needs = mode.needs(packing.stages[-1].depth, request.legs, settings.recent_limit)
    both = request.legs or needs.both
    asked = tuple(s for s in sources if s.wanted(settings, both))
    reads = any(s.reads_vector(settings) for s in asked) or settings.entity_limit > 0
    weights = {s.name: w for s in sources if (w := s.weight(settings)) is not None}
    return TurnPlan(
        request=request,
        settings=settings,
        mode=mode,
        rule=rule,
        window=window,
        depth=needs.depth,
        headroom=needs.headroom,
        sources=asked,
        weights=weights,
        embed=reads and request.vector is None,
        pool=needs.limit,
        packing=packing,
        packer=packer or PACKERS[mode.packer],
        order=_order(settings.memory_order, request.message),
    )


def budget_packing(settings: RuntimeSettings, message: str) -> Packing:
    """How the turn packs: in the stages its budget takes, each as deep as the message
    needs (without a budget, one: the spec's first `semanticLimit`). The last stage's depth
    is how many fused memories packing chooses from."""
    if settings.context_budget <= 0:
        return Packing((Stage(0, settings.semantic_limit),))
    return packing_for(settings.context_budget, message, settings.semantic_limit)


def within_named_time(
    settings: RuntimeSettings, message: str, now: datetime | None, rule: EpisodeFilter | None
) -> tuple[EpisodeFilter | None, TimeWindow | None]:
    """With `timeAware` "filter", the turn's filter narrowed to the time its message names
    (read against `now`, the clock's when None), and that time; else the filter as given."""
    window = (
        None if settings.time_aware == "off" else named_window(message, now or datetime.now(UTC))
    )
    if window is None:
        return rule, None
    start, end = to_utc_text(window.start), to_utc_text(window.end)
    return (rule or EpisodeFilter()).narrowed(start, end), window


def _order(setting: str, message: str) -> str:
    """`memoryOrder` for this message: "auto" gives time order to a question about the
    order of events, rank order to any other."""
    if setting != "auto":
        return setting
    return "time" if asks_for_order(message) else "rank"
