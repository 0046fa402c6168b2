"""A turn's plan: everything the settings and the fusion mode decide about it, before any
I/O. Pure, so that what a turn will do can be read (and tested) without running it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexusai.embedders import Embedder, Vector
from nexusai.models import EpisodeFilter, Scope
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.modes import FusionMode, Learned
from nexusai.orchestration.retrieval import LegQuery, wants_keyword, within_named_time
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.turn.request import TurnRequest
from nexusai.timewords import TimeWindow, asks_for_order


@dataclass(frozen=True)
class TurnPlan:
    request: TurnRequest
    settings: RuntimeSettings
    mode: FusionMode
    rule: EpisodeFilter | None  # the request's, narrowed to the time its message names
    window: TimeWindow | None  # that time (timeAware), or None
    depth: int  # rows each leg is asked for
    headroom: int | None  # rows the keyword leg asks past `depth` (None: the spec's, depth)
    semantic: bool  # whether the semantic leg is asked
    keyword: bool  # whether the keyword leg is asked
    embed: bool  # whether the message is embedded here (not given, and something reads it)
    fused: int  # how many memories fusion gives packing
    order: str  # the memories' order: "rank" or "time" (`memoryOrder`, "auto" resolved)

    @property
    def message(self) -> str:
        return self.request.message

    @property
    def keeps_legs(self) -> bool:
        """Whether the turn's answer carries both legs' lists."""
        return self.request.legs

    def leg_query(
        self,
        memory: MemoryClient,
        scope: Scope,
        vector: Vector | None = None,
        recent_ids: Sequence[int] = (),
    ) -> LegQuery:
        """What every source of the turn searches with: one scope, one filter, the recent
        turns left out."""
        return LegQuery(
            memory,
            self.message,
            vector,
            scope.session_ids,
            list(recent_ids),
            self.depth,
            self.settings.keyword_budget,
            scope.every_session,
            self.headroom,
            self.rule,
        )

    def warnings(self, embedder: Embedder) -> list[str]:
        """What the turn says of its settings before it searches."""
        said = []
        ranker = self.mode.ranker if isinstance(self.mode, Learned) else None
        trained = ranker.trained_on.get("embedder", embedder.name) if ranker else embedder.name
        if trained != embedder.name:
            said.append(
                f"the learned ranker was trained on {trained}'s vectors and this service"
                f" embeds with {embedder.name}, so its order is not what was measured: train"
                " one for this embedder (nexus ranker train) and point NEXUS_RANKER at it"
            )
        weights = (self.settings.semantic_weight, self.settings.keyword_weight)
        if weights == (0, 0) and ranker is None:
            # Within the spec's ranges, so allowed; but a turn with no memories says why.
            said.append(
                "semanticWeight and keywordWeight are both 0, so no memories are retrieved:"
                " set one above 0 (PATCH /settings)"
            )
        return said


def plan(settings: RuntimeSettings, request: TurnRequest, mode: FusionMode) -> TurnPlan:
    """The turn as these settings and this mode would run it: the filter after
    `timeAware`, each leg's depth and headroom, which legs are asked, whether the message
    is embedded."""
    rule, window = within_named_time(settings, request.message, request.now, request.rule)
    asks = mode.asks(settings, request.legs)
    both = request.legs or asks.both
    semantic = both or settings.semantic_weight > 0
    wanted = semantic or settings.entity_limit > 0
    return TurnPlan(
        request,
        settings,
        mode,
        rule,
        window,
        asks.depth,
        asks.headroom,
        semantic,
        wants_keyword(settings, both),
        wanted and request.vector is None,
        asks.limit,
        _order(settings.memory_order, request.message),
    )


def _order(setting: str, message: str) -> str:
    """`memoryOrder` for this message: "auto" gives time order to a question about the
    order of events, rank order to any other."""
    if setting != "auto":
        return setting
    return "time" if asks_for_order(message) else "rank"
