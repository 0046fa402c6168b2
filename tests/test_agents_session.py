"""`NexusSession` against the Agents SDK's own `SQLiteSession`, operation by operation:
the same items in, the same items out (messages, tool calls and their outputs, limits,
pops, clears), over a running service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from nexusai.app import create_app
from nexusai.client import AsyncClient
from nexusai.config import Config
from tests.conftest import SwitchableEmbedder
from tests.live_server import live_server

CALL = {
    "type": "function_call",
    "call_id": "c1",
    "name": "recall",
    "arguments": '{"query": "dog"}',
}
ITEMS: list[list[Any]] = [
    [{"role": "user", "content": "My dog is Biscuit."}],
    [{"role": "assistant", "content": "Lovely name!"}],
    [CALL, {"type": "function_call_output", "call_id": "c1", "output": "Biscuit"}],
    [
        {"role": "user", "content": [{"type": "input_text", "text": "And the cat?"}]},
        {"role": "assistant", "content": "You have not told me about a cat."},
    ],
]


@pytest.fixture
def served(config: Config, embedder: SwitchableEmbedder) -> Iterator[str]:
    with live_server(create_app(config, embedder)) as url:
        yield url


def test_the_session_gives_what_the_sdks_own_sqlite_session_gives(served: str) -> None:
    from agents import SQLiteSession

    from nexusai.integrations.openai_agents import NexusSession

    async def run() -> None:
        theirs = SQLiteSession("same", db_path=":memory:")
        async with AsyncClient(served) as client:
            ours = NexusSession(session="same", project="agents", client=client)
            both = (ours, theirs)
            for batch in ITEMS:
                for session in both:
                    await session.add_items(batch)
                assert await ours.get_items() == await theirs.get_items()
                for limit in (0, 1, 2, 100):
                    assert await ours.get_items(limit) == await theirs.get_items(limit)
            assert await ours.pop_item() == await theirs.pop_item()
            assert await ours.get_items() == await theirs.get_items()
            for session in both:
                await session.clear_session()
            assert await ours.get_items() == await theirs.get_items() == []
            assert await ours.pop_item() is await theirs.pop_item() is None

    asyncio.run(run())
