"""The JSON both services speak: camelCase models for requests, answers and errors.

Shared by the memory service's API, the orchestration service's API and the HTTP memory
client, so this module imports neither service: only the domain rows in `models`.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    model_validator,
)
from pydantic.alias_generators import to_camel

from nexusai.errors import InvalidInput
from nexusai.models import (
    Entity,
    Episode,
    EpisodeFilter,
    now_text,
    parse_time,
    time_window,
    unstorable,
)

# SQLite's integers are 64-bit: an id past this names nothing and is refused as out of
# range, the same way in a path, a query and a body.
MAX_ID = 2**63 - 1
Id = Annotated[int, Field(ge=1, le=MAX_ID, description="An id (1 to 2**63 - 1)")]


# Every date a request carries, on every face: ISO 8601 text only (`models.parse_time`).
IsoTime = Annotated[datetime, BeforeValidator(parse_time)]


class CamelModel(BaseModel):
    """Python names in snake_case, JSON names in camelCase (as the spec spells them)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)


class StrictCamelModel(CamelModel):
    """A request body: unknown keys are an error, and types are strict (a boolean is not an
    id, a string is not a number); a time field opts back into ISO 8601 text. Every text in
    it can be stored (`unstorable`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _storable(self) -> Self:
        check_storable(self)
        return self


def check_storable(model: BaseModel) -> None:
    """Raises ValueError naming the first field whose text no store can hold."""
    for name in type(model).model_fields:
        fault = unstorable(getattr(model, name))
        if fault is not None:
            raise ValueError(f"{to_camel(name)}: {fault}")


class FieldError(BaseModel):
    field: str
    message: str


class ErrorOut(BaseModel):
    """Every error the service answers with: `detail` says what to fix."""

    detail: str
    errors: list[FieldError] | None = None


class ProjectOut(CamelModel):
    id: int
    name: str
    created_at: str
    retention_days: int | None = Field(
        default=None, description="Its episodes are kept this many days after being said"
    )


class SessionOut(CamelModel):
    id: int
    project_id: int | None
    title: str | None
    created_at: str
    started_at: str | None = Field(
        default=None, description="When its conversation began: its earliest episode's time"
    )


class EpisodeOut(CamelModel):
    id: int
    session_id: int
    speaker: str
    content: str
    occurred_at: str
    created_at: str
    metadata: dict[str, Any]
    image_caption: str | None = None

    def to_episode(self) -> Episode:
        """The domain row back from JSON (what the indexes saw is not sent out; what a
        write or a search says beside the row is no field of it)."""
        kept = {f.name for f in dataclasses.fields(Episode)}
        return Episode(**{k: v for k, v in self.model_dump().items() if k in kept})


class MarkedEpisodeOut(EpisodeOut):
    """An episode with the marks a turn reads: pinned by the user, or standing."""

    pinned: bool = Field(description="Pinned: every turn of its scope carries it")
    standing: Literal["instruction", "preference"] | None = Field(
        description="Recognised when stored as a rule the user set or a lasting preference"
    )
    expires_at: str | None = Field(
        default=None, description="From this time no read returns it; null: never"
    )


class EditedEpisodeOut(MarkedEpisodeOut):
    """The episode as an edit left it, and what the edit did that was not asked in words."""

    warnings: list[str] = Field(
        default_factory=list,
        description="What the edit did beyond its fields: moved past its project's retention"
        " or its own expiry, it is hidden at once and deleted by the upkeep",
    )


class ScoredEpisodeOut(EpisodeOut):
    """An episode as a search found it."""

    score: float | None = Field(
        default=None, description="The search's score: cosine, or BM25 (higher is better)"
    )
    matched_in: Literal["message", "turnBefore"] | None = Field(
        default=None,
        description="A keyword search's: where its words were found, in this message or only"
        " in the end of the turn before it (indexed with each message, for replies)",
    )


class EpisodeDetailOut(MarkedEpisodeOut):
    """An episode with what was derived from it, for browsing."""

    vector_state: str = Field(description="indexed, or pending (not searchable by meaning yet)")
    entities: list[str] = Field(description="Names of the entities it mentions")


class EntityOut(CamelModel):
    id: int
    name: str
    type: str
    first_seen: str
    last_seen: str
    mention_count: int
    summary: str | None
    latest_mention_ids: list[int]

    def to_entity(self) -> Entity:
        return Entity(**self.model_dump())


class ScopeOut(CamelModel):
    session_ids: list[int]
    project_id: int | None = Field(default=None, description="The session's project")
    every_session: bool = Field(
        default=False,
        description="Whether these are every session in the store: a search then needs no"
        " filter on them",
    )


class StoredEpisodeOut(EpisodeOut):
    """An episode as a write stored it."""

    expires_at: str | None = Field(
        default=None,
        description="From this time no read returns it (its own expiry or its project's"
        " retention, the sooner); null: never. In the past: stored already expired, so no"
        " read returns it and the upkeep deletes it",
    )
    warnings: list[str] = Field(
        default_factory=list,
        exclude_if=lambda said: not said,  # said only when there is one
        description="What the write did beyond storing it: stored already past its expiry"
        " or its project's retention, it is hidden at once and deleted by the upkeep (left"
        " out when there is none)",
    )

    @model_validator(mode="after")
    def _past_its_expiry(self) -> Self:
        if self.expires_at is not None and self.expires_at <= now_text() and not self.warnings:
            self.warnings.append(
                f"episode {self.id} was stored past its expiry ({self.expires_at}: its own"
                " expiresAt or its project's retention, from occurredAt): no read returns it"
                " and the upkeep deletes it; give a later occurredAt or expiresAt, or lift"
                " the project's retention"
            )
        return self


class EpisodeBatchOut(CamelModel):
    episodes: list[StoredEpisodeOut]


class Health(CamelModel):
    status: str
    episodes: int
    vectors_rebuilding: int = Field(
        default=0, description="Episodes waiting for a vector the index lost (being rebuilt)"
    )
    entities_pending: int = Field(
        default=0,
        description="Episodes whose entities are still to be extracted, and entities not"
        " yet searchable by meaning: a serving memory extracts behind every write and"
        " import, so a write never waits for it; 0 when entity extraction is off",
    )
    vector_index_optimizing: bool = Field(
        default=False,
        description="The episodes' vector index is being optimized (search graph built,"
        " deleted points vacuumed) in a child process; searches are served meanwhile",
    )


class VectorHit(CamelModel):
    id: int
    score: float


class EntityDetail(EntityOut):
    mentions: list[EpisodeOut]


Scalar = str | int | float | bool
_SCALARS: list[JsonValue] = [{"type": t} for t in ("string", "number", "boolean")]
# What one metadata key of a filter takes, for the schema (checked by `check_metadata_values`).
_METADATA_VALUE: JsonValue = {"anyOf": [*_SCALARS, {"type": "array", "items": {"anyOf": _SCALARS}}]}


class FilterIn(StrictCamelModel):
    """Which episodes, as every face says it: `{"after": "2026-03-01T00:00:00Z", "before":
    null, "speaker": ["user"], "metadata": {"topic": "travel", "lang": ["de", "en"]}}`."""

    after: IsoTime | None = Field(
        default=None, strict=False, description="Said at or after this time (ISO 8601)"
    )
    before: IsoTime | None = Field(
        default=None, strict=False, description="Said before this time (ISO 8601)"
    )
    speaker: list[str] | None = Field(
        default=None, description="Said by one of these (at least one; leave it out for any)"
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A top-level metadata key has this value, or one of these (numbers as"
        ' numbers, 1 matches 1.0; and as text, 1 matches "1"); a value is a string, number or'
        " boolean, or a list of them",
        json_schema_extra={"additionalProperties": _METADATA_VALUE},
    )

    @model_validator(mode="after")
    def _a_window(self) -> Self:
        """Refused when the filter is made, not when it is sent (pydantic's own error). An
        empty one-of list would keep nothing on a read and, dropped from a query string,
        everything on a forget: it is refused on every face instead."""
        try:
            time_window(self.after, self.before)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        if self.speaker is not None:
            check_speakers(self.speaker)
        for key, value in (self.metadata or {}).items():
            check_metadata_values(key, value)
        return self

    @classmethod
    def of(cls, rule: EpisodeFilter) -> FilterIn:
        """The filter as it is sent on (values as the text they are compared as)."""
        return cls(
            after=None if rule.after is None else datetime.fromisoformat(rule.after),
            before=None if rule.before is None else datetime.fromisoformat(rule.before),
            speaker=list(rule.speakers) or None,
            metadata={key: list(values) for key, values in rule.metadata} or None,
        )

    def to_filter(self) -> EpisodeFilter:
        after, before = time_window(self.after, self.before)
        metadata = tuple(
            (key, tuple(map(as_text, value if isinstance(value, list) else [value])))
            for key, value in (self.metadata or {}).items()
        )
        return EpisodeFilter(after, before, tuple(self.speaker or ()), metadata)

    def query(self) -> dict[str, Any]:
        """The filter as `GET /episodes/search` and `DELETE /episodes` take it."""
        rule = self.to_filter()
        params: dict[str, Any] = {
            "after": rule.after,
            "before": rule.before,
            "speaker": list(rule.speakers) or None,
        }
        for key, values in rule.metadata:
            params[f"metadata.{key}"] = list(values)
        return params


def check_speakers(speakers: list[str]) -> None:
    """ValueError for an empty list or an empty speaker: each would keep nothing."""
    if not speakers:
        raise ValueError("speaker: name at least one speaker, or leave speaker out")
    if any(not s.strip() for s in speakers):
        raise ValueError("speaker: a speaker is a non-empty name")


def check_metadata_values(key: str, value: Any) -> None:
    """ValueError naming `metadata.KEY` when its value is not a scalar or a non-empty list
    of them (one message, where pydantic would list every branch of the union)."""
    if not key.strip():
        raise ValueError('metadata: name a metadata key, as {"topic": "travel"}')
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError(f"metadata.{key}: give at least one value, or leave the key out")
    if not all(isinstance(v, Scalar) for v in values):
        raise ValueError(f"metadata.{key}: give a string, number or boolean, or a list of them")


def as_text(value: Scalar) -> str:
    """A metadata value as a filter compares it: JSON's text for numbers and booleans."""
    return value if isinstance(value, str) else json.dumps(value)


class ForgetOut(CamelModel):
    episodes: int = Field(
        description="How many episodes the filter kept: deleted, or not in a dry run"
    )
    episode_ids: list[int] = Field(description="Their ids, oldest first (the first 1,000)")
    dry_run: bool


class ImportOut(CamelModel):
    conversations: int
    sessions: int
    episodes: int
    skipped: int
    seconds: float


class MovedOut(CamelModel):
    feature: str = Field(description="A feature of the learned ranker (docs/retrieval.md)")
    value: float = Field(description="Its value for this memory")
    effect: float = Field(description="How much it moved the ranker's score (log-odds), up or down")
    meaning: str = Field(default="", description="What the feature is, in one line")


class ExcerptOut(CamelModel):
    """Where the `content` given is in the episode's whole text (`GET /episodes/{id}`)."""

    start: int = Field(description="Offset of its first character in the whole text")
    end: int = Field(description="Offset just past its last character")
    length: int = Field(description="How long the whole text is, in characters")


class MemoryOut(EpisodeOut):
    score: float | None = Field(
        default=None,
        description="Fused RRF score, or the learned ranker's score, in log-odds (explain)",
    )
    probability: float | None = Field(
        default=None,
        description="At fusion learned, with explain: the ranker's estimate, from 0 to 1, that"
        " this memory answers the message (its score as a probability)",
    )
    ranks: dict[str, int] | None = Field(
        default=None,
        description="With explain: its 1-based rank in each source that found it, by the"
        ' source\'s name ({"semantic": 3, "keyword": 1}); a source that missed it is absent',
    )
    semantic_rank: int | None = Field(
        default=None, description='1-based; null: not found (ranks["semantic"])'
    )
    keyword_rank: int | None = Field(
        default=None, description='1-based; null: not found (ranks["keyword"])'
    )
    features: list[MovedOut] | None = Field(
        default=None,
        description="At fusion learned, with explain: the features that moved it most",
    )
    placed_by: Literal["ranker", "rrf"] | None = Field(
        default=None,
        description='At fusion learned, with explain: "ranker", or "rrf" for the places'
        " (every third) that go to RRF (1, 1)'s best not yet placed",
    )
    tokens: int | None = Field(
        default=None,
        description="With a contextBudget: what its line costs in the prompt, its speaker"
        " named (`tokens` of the context is the whole block's)",
    )
    excerpt: ExcerptOut | None = Field(
        default=None,
        description="With a contextBudget, when a long episode was cut to the passage that"
        " matters: `content` is that passage, and this says where it is in the whole text",
    )


class StandingOut(MarkedEpisodeOut):
    """A memory a turn carries whatever its search found: pinned, or a rule or lasting
    preference of the user's."""

    similarity: float | None = Field(
        default=None, description="A recognised one's: its cosine to the message (pinned: null)"
    )
    tokens: int = Field(description="What its line costs in the prompt, its speaker named")


class RecalledOut(MemoryOut):
    """A memory as a recall gives it: the `k` best matches first, each as the search ranked
    it, then the turn's standing memories not among them."""

    standing: Literal["pinned", "instruction", "preference"] | None = Field(
        default=None,
        description="A standing memory's mark: pinned, or a rule or lasting preference the"
        " user stated (a turn carries these whatever its search found); null: a match alone",
    )


class LegsOut(CamelModel):
    """Each fused source's ranked candidates as fusion took them, so a client can re-fuse
    them at other weights: score = semanticWeight / (rrfK + semantic rank) + keywordWeight /
    (rrfK + keyword rank), a list an episode is absent from adding nothing."""

    semantic: list[int] = Field(description="Episode ids, best first")
    keyword: list[int] = Field(description="Episode ids, best first")
    lists: dict[str, list[int]] = Field(
        default_factory=dict,
        description="Every fused source's episode ids, best first, by the source's name"
        " (semantic and keyword among them)",
    )
    terms: list[str] = Field(description="The message's keyword terms, as the index got them")
    rrf_k: int
    episodes: list[EpisodeOut] = Field(description="Every candidate once, in no order")


class ContextOut(CamelModel):
    session_id: int
    recent: list[EpisodeOut]
    memories: list[MemoryOut]
    entities: list[EntityOut]
    warnings: list[str]
    legs: LegsOut | None = Field(default=None, description="With `legs`: both legs' lists")
    standing: list[StandingOut] | None = Field(
        default=None,
        description="Pinned episodes, then the user's rules and lasting preferences nearest"
        " the message (`standingLimit`), none of them among `recent`; without a"
        " contextBudget one may also be among `memories` (the prompt gives it once, here);"
        " left out when the scope has none",
    )
    tokens: int | None = Field(
        default=None,
        description="With a contextBudget: what the standing and memory sections of"
        " `prompt` cost, in all (each memory's `tokens` is its line; a section's caption and"
        " date headers are counted here too)",
    )
    prompt: str = Field(
        description="The standing memories, memories and entities as the chat prompt gives"
        " them to the LLM: grouped by conversation, a date over each group, a speaker on"
        " each line (docs/retrieval.md). Put it in your own system message as it is",
    )
    budget: int | None = Field(default=None, description="The contextBudget this turn kept")
    time_window: TimeWindowOut | None = Field(
        default=None,
        description="With timeAware filter: the time the message named, the only one searched",
    )

    def searched(self) -> list[MemoryOut]:
        """The memories not also listed under `standing`: what a face gives besides them,
        so that each is given once."""
        standing = {kept.id for kept in self.standing or []}
        return [m for m in self.memories if m.id not in standing]


class TimeWindowOut(CamelModel):
    after: datetime
    before: datetime
    said: str = Field(description="The message's words that named it")


class ChatOut(CamelModel):
    reply: str | None
    user_episode_id: int
    assistant_episode_id: int | None
    context: ContextOut
