"""The memory service's HTTP API, a router per resource. Every route runs behind the door's
check (`common.admitted`); the retrieval routes come before the episodes' own, so that
`/episodes/search` and `/episodes/standing` are never taken for an episode's id."""

from fastapi import APIRouter, Depends

from nexusai.http import StrictJSONRoute
from nexusai.memory.api import entities, episodes, health, imports, projects, retrieval, sessions
from nexusai.memory.api.common import admitted

router = APIRouter(dependencies=[Depends(admitted)], route_class=StrictJSONRoute)
for part in (health, projects, sessions, retrieval, episodes, entities, imports):
    router.include_router(part.router)
