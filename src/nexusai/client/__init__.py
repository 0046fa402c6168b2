"""A typed Python client for nexusai's HTTP API: `Client` (blocking) and `AsyncClient`.

    from nexusai.client import Client

    with Client() as nexus:                       # NEXUS_URL, NEXUS_API_KEY, or arguments
        project = nexus.create_project("home")
        session = nexus.create_session(project_id=project.id)
        nexus.add_episodes(session.id, [{"speaker": "user", "content": "My dog is Biscuit"}])
        context = nexus.context(session.id, "What is my dog called?", explain=True)

Every endpoint is described once, in `Endpoints`, as a `Call`; the two clients only send
calls (so they cannot drift apart). Answers come back as the models the API itself
answers with (`nexusai.schemas`); errors as `NexusAPIError` subclasses that carry the
API's message. Calls that change nothing are retried on connection errors; writes never
are (a write that may have landed is not sent twice).
"""

from nexusai.client.calls import Call, Endpoints, Settings, checked_filter, turn_body
from nexusai.client.clients import DEFAULT_URL, AsyncClient, BaseClient, Client, default_url
from nexusai.client.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    LLMFailedError,
    NexusAPIError,
    NotFoundError,
    StorageFullError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
)
from nexusai.client.events import (
    ChatEvent,
    ContextEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    chat_event,
)

__all__ = [
    "DEFAULT_URL",
    "AsyncClient",
    "BaseClient",
    "Call",
    "ChatEvent",
    "Client",
    "ConflictError",
    "ContextEvent",
    "DeltaEvent",
    "DoneEvent",
    "Endpoints",
    "ErrorEvent",
    "ForbiddenError",
    "InvalidInputError",
    "LLMFailedError",
    "NexusAPIError",
    "NotFoundError",
    "Settings",
    "StorageFullError",
    "TooLargeError",
    "UnauthorizedError",
    "UnavailableError",
    "chat_event",
    "checked_filter",
    "default_url",
    "turn_body",
]
