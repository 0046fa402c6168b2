"""Episodes: stored one or a batch at a time (answered once per idempotency key), listed,
read, changed, pinned and deleted."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from pydantic import Discriminator, Field, Tag

from nexusai.errors import InvalidInput, TooLarge
from nexusai.http import PathId, StrictJSONRoute, errors, parse_id_list
from nexusai.idempotency import answered_once
from nexusai.memory.api.common import (
    PAGED,
    Limit,
    MemoryHandle,
    Offset,
    TenancyHandle,
    page,
)
from nexusai.memory.api.filters import episode_filter
from nexusai.memory.api.sessions import SessionResolveIn
from nexusai.memory.repositories.validation import UNSET
from nexusai.models import EpisodeFilter, NewEpisode, now_text
from nexusai.schemas import (
    EditedEpisodeOut,
    EpisodeBatchOut,
    EpisodeDetailOut,
    EpisodeOut,
    ForgetOut,
    IsoTime,
    MarkedEpisodeOut,
    StoredEpisodeOut,
    StrictCamelModel,
)

router = APIRouter(route_class=StrictJSONRoute)


class EpisodeIn(StrictCamelModel):
    speaker: str = Field(min_length=1, max_length=200, examples=["user"])
    content: str = Field(examples=["I adopted a puppy called Biscuit"])
    occurred_at: IsoTime | None = Field(
        default=None, strict=False, description="When it was said (ISO 8601); defaults to now"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Yours, stored as given and never indexed"
    )
    image_caption: str | None = Field(
        default=None,
        max_length=2000,
        description="What an image shared in this turn shows; indexed with the text",
    )
    expires_at: IsoTime | None = Field(
        default=None,
        strict=False,
        description="From this time (ISO 8601) no read returns it, and the upkeep deletes it",
    )

    def to_new(self) -> NewEpisode:
        return NewEpisode(
            self.speaker,
            self.content,
            self.occurred_at,
            self.metadata,
            self.image_caption,
            expires_at=self.expires_at,
        )


class EpisodeBatchIn(StrictCamelModel):
    episodes: list[EpisodeIn] = Field(min_length=1)


class EpisodePatch(StrictCamelModel):
    speaker: str | None = Field(default=None, min_length=1, max_length=200)
    content: str | None = None
    occurred_at: IsoTime | None = Field(
        default=None,
        strict=False,
        description="Move the turn in time (ISO 8601); the turns around it are re-indexed",
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A JSON merge patch (RFC 7396) over the stored metadata: keys given are"
        " set, keys given as null are removed, the rest stay; null clears all of it",
    )
    image_caption: str | None = Field(
        default=None, max_length=2000, description="Set the image caption; null removes it"
    )
    pinned: bool | None = Field(
        default=None,
        description="true pins it: every turn of its scope carries it, under `standing`;"
        " false unpins it",
    )
    expires_at: IsoTime | None = Field(
        default=None,
        strict=False,
        description="From this time no read returns it and the upkeep deletes it; null: never",
    )


def _episode_or_batch(body: Any) -> str:
    return "batch" if isinstance(body, dict) and "episodes" in body else "episode"


EpisodesBody = Annotated[
    Annotated[EpisodeIn, Tag("episode")] | Annotated[EpisodeBatchIn, Tag("batch")],
    Discriminator(_episode_or_batch),
    Body(description='One episode, or a batch as {"episodes": [...]}'),
]


class NamedEpisodesIn(SessionResolveIn):
    episodes: list[EpisodeIn] = Field(min_length=1)


@router.post(
    "/sessions/resolve/episodes",
    status_code=201,
    tags=["episodes"],
    responses=errors(409, 413, 415, 422, 507),
)
def add_episodes_named(
    request: Request,
    response: Response,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    body: NamedEpisodesIn,
) -> EpisodeBatchOut:
    """A batch into the session with this title in the project of this name (or in no
    project), made with the project when missing, in the batch's own transaction: a batch
    that is refused makes nothing. `Idempotency-Key` as for a session's episodes."""
    project = tenancy.project_name(body.project)
    _check_batch_size(request, body.episodes)

    def store() -> EpisodeBatchOut:
        new = [i.to_new() for i in body.episodes]
        stored = memory.add_episodes_named(project, body.title, new)
        return EpisodeBatchOut(episodes=[StoredEpisodeOut.model_validate(e) for e in stored])

    return answered_once(request, response, body.model_dump(mode="json"), store)


def _check_batch_size(request: Request, items: list[EpisodeIn]) -> None:
    limit = request.app.state.config.max_batch_size
    if len(items) > limit:
        raise TooLarge(f"a batch holds at most {limit} episodes (NEXUS_MAX_BATCH_SIZE)")


@router.post(
    "/sessions/{session_id}/episodes",
    status_code=201,
    tags=["episodes"],
    responses=errors(404, 409, 413, 415, 422, 507),
)
def add_episodes(
    request: Request,
    response: Response,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    session_id: PathId,
    body: EpisodesBody,
) -> StoredEpisodeOut | EpisodeBatchOut:
    """One episode `{speaker, content, occurredAt?, imageCaption?, metadata?, expiresAt?}`,
    or a batch `{"episodes": [...]}` stored all or nothing (an error names the item,
    `episodes[3]: ...`). Each is answered with its `expiresAt`: from then on no read
    returns it, and the upkeep deletes it (in the past: stored already expired). With an
    `Idempotency-Key` header, the same request sent again within a day is stored once and
    answered as the first was."""
    tenancy.session(session_id)
    items = body.episodes if isinstance(body, EpisodeBatchIn) else [body]
    _check_batch_size(request, items)

    def store() -> StoredEpisodeOut | EpisodeBatchOut:
        stored = memory.add_episodes(session_id, [i.to_new() for i in items])
        out = [StoredEpisodeOut.model_validate(e) for e in stored]
        return EpisodeBatchOut(episodes=out) if isinstance(body, EpisodeBatchIn) else out[0]

    return answered_once(request, response, body.model_dump(mode="json"), store)


@router.get(
    "/sessions/{session_id}/episodes",
    tags=["episodes"],
    responses=errors(404, 422),
    openapi_extra=PAGED,
)
def list_episodes(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    session_id: PathId,
    rule: Annotated[EpisodeFilter, Depends(episode_filter)],
    limit: Limit = 100,
    offset: Offset = 0,
    detail: Annotated[
        bool, Query(description="Add each episode's vector state and entity names")
    ] = False,
) -> list[EpisodeDetailOut] | list[EpisodeOut]:
    """A session's episodes in time order, a page at a time; with a filter (`after`,
    `before`, `speaker`, `metadata.KEY`), only those it keeps."""
    tenancy.session(session_id)
    episodes = memory.store.episodes.page(session_id, limit, offset, rule)
    page(request, response, memory.store.episodes.count(session_id, rule), limit, offset)
    if not detail:
        return [EpisodeOut.model_validate(e) for e in episodes]
    ids = [e.id for e in episodes]
    states, names = memory.vector_states(ids), memory.entities.names_by_episode(ids)
    return [
        EpisodeDetailOut(
            **MarkedEpisodeOut.model_validate(e).model_dump(),
            vector_state=states[e.id].value,
            entities=names.get(e.id, []),
        )
        for e in episodes
    ]


@router.get("/episodes/{episode_id}", tags=["episodes"], responses=errors(404, 422))
def get_episode(tenancy: TenancyHandle, episode_id: PathId) -> MarkedEpisodeOut:
    """One episode, with `pinned`, `standing` (`instruction` or `preference` when it was
    recognised as the user's rule or lasting preference) and `expiresAt`; past its
    `expiresAt` it is a 404."""
    return MarkedEpisodeOut.model_validate(tenancy.episode(episode_id))


@router.patch(
    "/episodes/{episode_id}", tags=["episodes"], responses=errors(404, 413, 415, 422, 507)
)
def update_episode(
    memory: MemoryHandle, tenancy: TenancyHandle, episode_id: PathId, body: EpisodePatch
) -> EditedEpisodeOut:
    """Change a turn. Fields left out keep their values; `metadata` merges (RFC 7396: keys
    given are set, keys given as null removed; null clears it); `occurredAt` moves the turn
    (the turns around it are re-indexed; moved past its project's retention it is hidden at
    once and deleted by the upkeep, and `warnings` says so); `imageCaption` null removes
    it; `pinned` true makes every turn of its scope carry it (under `standing`);
    `expiresAt` null: never."""
    given = body.model_fields_set
    for name, field in (("content", "content"), ("occurredAt", "occurred_at")):
        if field in given and getattr(body, field) is None:
            raise InvalidInput(f"{name}: give a new value, or leave {name} out to keep it")
    tenancy.episode(episode_id)
    episode = memory.update_episode(
        episode_id,
        content=body.content,
        speaker=body.speaker,
        metadata=body.metadata if "metadata" in given else UNSET,
        image_caption=body.image_caption if "image_caption" in given else UNSET,
        occurred_at=body.occurred_at,
        pinned=body.pinned,
        expires_at=body.expires_at if "expires_at" in given else UNSET,
    )
    edited = EditedEpisodeOut.model_validate(episode)
    if edited.expires_at is not None and edited.expires_at <= now_text():
        edited.warnings.append(
            f"episode {episode_id} is past its expiry ({edited.expires_at}) as edited: no read"
            " returns it from now on and the upkeep deletes it; lifting the project's"
            " retention or the expiry does not bring it back"
        )
    return edited


@router.delete(
    "/episodes/{episode_id}", status_code=204, tags=["episodes"], responses=errors(404, 422)
)
def delete_episode(memory: MemoryHandle, tenancy: TenancyHandle, episode_id: PathId) -> Response:
    """Deletes the episode from every index; the turn after it is read with another."""
    tenancy.episode(episode_id)
    memory.delete_episode(episode_id)
    return Response(status_code=204)


@router.delete("/episodes", tags=["episodes"], responses=errors(404, 422))
def forget_episodes(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    rule: Annotated[EpisodeFilter, Depends(episode_filter)],
    session_ids: Annotated[
        str | None,
        Query(alias="sessionIds", description="Comma-separated session ids (all a key sees)"),
    ] = None,
    dry_run: Annotated[
        bool, Query(alias="dryRun", description="Only count what would be deleted")
    ] = False,
) -> ForgetOut:
    """Delete the episodes that a filter keeps, in these sessions, from the store, the
    keyword index, the vectors and the entity links; `dryRun=true` counts them and deletes
    nothing. A project key forgets only in its own project. With neither `sessionIds` nor a
    filter it refuses: delete a project or a session for that."""
    asked = parse_id_list("sessionIds", session_ids)
    if asked is None and rule.is_empty():
        raise InvalidInput(
            "give sessionIds or a filter (after, before, speaker, metadata.KEY) to say which"
            " episodes; to delete everything, delete the projects or sessions"
        )
    for session_id in asked or ():  # an unknown session is a 404, not "0 forgotten"
        tenancy.session(session_id)
    scope = tenancy.scope(asked)
    ids = (
        memory.store.episodes.matching_ids(scope, rule, live=True)
        if dry_run
        else memory.forget(scope, rule)
    )
    return ForgetOut(episodes=len(ids), episode_ids=ids[:1000], dry_run=dry_run)
