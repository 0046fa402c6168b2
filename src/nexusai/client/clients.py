"""The blocking `Client` and the `AsyncClient`: where the service is, its key, sending
calls (and trying a safe one again), streaming a chat turn and sending a file."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import IO, Any, Concatenate, ParamSpec, TypeVar

import httpx

from nexusai.client.calls import Call, Endpoints, T, import_params, turn_body
from nexusai.client.errors import checked, unreachable
from nexusai.client.events import ChatEvent, EventReader
from nexusai.schemas import ImportOut

P = ParamSpec("P")


DEFAULT_URL = "http://127.0.0.1:4000"


def default_url() -> str:
    """Where a service on this machine listens when NEXUS_URL is not set: loopback, on
    NEXUS_PORT when that is a port (as `nexus serve` reads it), else 4000."""
    port = os.environ.get("NEXUS_PORT", "").strip()
    if port.isdigit() and 1 <= int(port) <= 65535:
        return f"http://127.0.0.1:{int(port)}"
    return DEFAULT_URL


def _settings(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    url = (base_url or os.environ.get("NEXUS_URL") or default_url()).rstrip("/")
    key = api_key or os.environ.get("NEXUS_API_KEY", "").split(",")[0].strip()
    return url, ({"Authorization": f"Bearer {key}"} if key else {})


def _counted(stream: IO[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """The file in 64 KiB pieces; `progress` is told the bytes sent so far."""
    sent = 0
    while chunk := stream.read(1 << 16):
        sent += len(chunk)
        if progress:
            progress(sent)
        yield chunk


def _blocking(build: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))

    return _described(method, build)


def _awaiting(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))

    return _described(method, build)


M = TypeVar("M", bound=Callable[..., Any])


def _described(method: M, build: Callable[..., Any]) -> M:
    """The method shows the endpoint's own name, parameters, answer and doc (for help(),
    IDEs and the docs), not `(*args, **kwargs)`."""
    signature = inspect.signature(build)
    answer = str(signature.return_annotation)
    if answer.startswith("Call[") and answer.endswith("]"):
        answer = answer[5:-1]  # what the method returns: what the call reads
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *signature.parameters.values()], return_annotation=answer
    )
    method.__name__ = method.__qualname__ = build.__name__
    method.__doc__ = build.__doc__
    return method


class BaseClient:
    """What the blocking and the async client share, as httpx's two clients do: where the
    service is, its key, and when a call that could not reach it is tried again."""

    def __init__(self, base_url: str | None, api_key: str | None, retries: int) -> None:
        self.url, self.headers = _settings(base_url, api_key)
        self.retries = retries

    def attempts(self, call: Call[Any]) -> range:
        """The tries a call gets: a write that is not known to be safe to repeat gets one."""
        return range(call.tries(self.retries))

    def unreachable(self, call: Call[Any], attempt: int, exc: httpx.TransportError) -> None:
        """Raises UnavailableError after a call's last try; after any other, returns."""
        if attempt == call.tries(self.retries) - 1:
            raise unreachable(self.url, exc) from None


class Client(BaseClient):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries)
        self._http = httpx.Client(
            base_url=self.url, headers=self.headers, timeout=timeout, transport=transport
        )

    def send(self, call: Call[T]) -> T:
        for attempt in self.attempts(call):
            try:
                return call.parse(checked(self._http.send(call.request(self._http))))
            except httpx.TransportError as exc:
                self.unreachable(call, attempt, exc)
        raise AssertionError("unreachable")

    def chat_stream(self, session_id: int, message: str, **turn: Any) -> Iterator[ChatEvent]:
        """The turn as it is made: `context`, then `delta`s, then `done` (or `error`);
        `settings`, `budget`, `filter` and `now` as `chat` takes them."""
        body = {**turn_body(session_id, message, **turn), "stream": True}
        try:
            with self._http.stream("POST", "/chat", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    checked(response)
                events = EventReader()
                for line in response.iter_lines():
                    if (event := events.feed(line)) is not None:
                        yield event
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from None

    def import_file(
        self,
        stream: IO[bytes],
        format: str,
        project: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportOut:
        """Streams a file to `POST /import`; `progress` is told the bytes sent so far."""

        params = import_params(format, project)
        try:
            response = self._http.post("/import", params=params, content=_counted(stream, progress))
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from None
        return ImportOut.model_validate(checked(response))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    create_project = _blocking(Endpoints.create_project)
    list_projects = _blocking(Endpoints.list_projects)
    get_project = _blocking(Endpoints.get_project)
    delete_project = _blocking(Endpoints.delete_project)
    set_retention = _blocking(Endpoints.set_retention)
    export_project = _blocking(Endpoints.export_project)
    create_session = _blocking(Endpoints.create_session)
    list_sessions = _blocking(Endpoints.list_sessions)
    get_session = _blocking(Endpoints.get_session)
    update_session = _blocking(Endpoints.update_session)
    resolve_session = _blocking(Endpoints.resolve_session)
    delete_session = _blocking(Endpoints.delete_session)
    add_episodes = _blocking(Endpoints.add_episodes)
    add_episodes_named = _blocking(Endpoints.add_episodes_named)
    list_episodes = _blocking(Endpoints.list_episodes)
    get_episode = _blocking(Endpoints.get_episode)
    update_episode = _blocking(Endpoints.update_episode)
    pin = _blocking(Endpoints.pin)
    forget = _blocking(Endpoints.forget)
    delete_episode = _blocking(Endpoints.delete_episode)
    standing = _blocking(Endpoints.standing)
    search = _blocking(Endpoints.search)
    context = _blocking(Endpoints.context)
    recall = _blocking(Endpoints.recall)
    chat = _blocking(Endpoints.chat)
    get_settings = _blocking(Endpoints.get_settings)
    update_settings = _blocking(Endpoints.update_settings)
    entities = _blocking(Endpoints.entities)
    entity = _blocking(Endpoints.entity)


class AsyncClient(BaseClient):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=self.headers, timeout=timeout, transport=transport
        )

    async def send(self, call: Call[T]) -> T:
        for attempt in self.attempts(call):
            try:
                return call.parse(checked(await self._http.send(call.request(self._http))))
            except httpx.TransportError as exc:
                self.unreachable(call, attempt, exc)
        raise AssertionError("unreachable")

    async def chat_stream(
        self, session_id: int, message: str, **turn: Any
    ) -> AsyncIterator[ChatEvent]:
        body = {**turn_body(session_id, message, **turn), "stream": True}
        try:
            async with self._http.stream("POST", "/chat", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    checked(response)
                events = EventReader()
                async for line in response.aiter_lines():
                    if (event := events.feed(line)) is not None:
                        yield event
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from None

    async def import_file(
        self,
        stream: IO[bytes],
        format: str,
        project: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportOut:
        """Streams a file to `POST /import`; `progress` is told the bytes sent so far."""

        async def chunks() -> AsyncIterator[bytes]:  # httpx's async client wants an async body
            for chunk in _counted(stream, progress):
                yield chunk

        params = import_params(format, project)
        try:
            response = await self._http.post("/import", params=params, content=chunks())
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from None
        return ImportOut.model_validate(checked(response))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    create_project = _awaiting(Endpoints.create_project)
    list_projects = _awaiting(Endpoints.list_projects)
    get_project = _awaiting(Endpoints.get_project)
    delete_project = _awaiting(Endpoints.delete_project)
    set_retention = _awaiting(Endpoints.set_retention)
    export_project = _awaiting(Endpoints.export_project)
    create_session = _awaiting(Endpoints.create_session)
    list_sessions = _awaiting(Endpoints.list_sessions)
    get_session = _awaiting(Endpoints.get_session)
    update_session = _awaiting(Endpoints.update_session)
    resolve_session = _awaiting(Endpoints.resolve_session)
    delete_session = _awaiting(Endpoints.delete_session)
    add_episodes = _awaiting(Endpoints.add_episodes)
    add_episodes_named = _awaiting(Endpoints.add_episodes_named)
    list_episodes = _awaiting(Endpoints.list_episodes)
    get_episode = _awaiting(Endpoints.get_episode)
    update_episode = _awaiting(Endpoints.update_episode)
    pin = _awaiting(Endpoints.pin)
    forget = _awaiting(Endpoints.forget)
    delete_episode = _awaiting(Endpoints.delete_episode)
    standing = _awaiting(Endpoints.standing)
    search = _awaiting(Endpoints.search)
    context = _awaiting(Endpoints.context)
    recall = _awaiting(Endpoints.recall)
    chat = _awaiting(Endpoints.chat)
    get_settings = _awaiting(Endpoints.get_settings)
    update_settings = _awaiting(Endpoints.update_settings)
    entities = _awaiting(Endpoints.entities)
    entity = _awaiting(Endpoints.entity)
