"""LangChain's own standard retriever suite (`langchain-tests`) against `NexusRetriever`
on a running service: by session name and by id, with a pinned memory in the project, and
under the project's warning policy (every warning an error: an unclosed client fails)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from nexusai.app import create_app
from nexusai.client import Client
from nexusai.config import Config
from nexusai.integrations.langchain import NexusRetriever
from tests.conftest import SwitchableEmbedder
from tests.live_server import live_server

pytestmark = [pytest.mark.model, pytest.mark.anyio]

FACTS = [
    "My sister Ana lives in Porto and teaches chemistry",
    "The car is due for its inspection in March",
    "I started learning the cello last autumn",
    "Our cat Miso is allergic to salmon",
    "The team moved the release to the second week of June",
    "I keep the spare house key under the blue flower pot",
    "My favourite walk is along the river to the old mill",
    "The dentist appointment is on Thursday at nine",
]
PINNED = "Remember: the wifi password is taped under the router"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[dict[str, Any]]:
    """One service for the module: a project whose session holds eight facts, and another
    whose session holds the same and a pinned memory."""
    data = Path(tmp_path_factory.mktemp("langchain")) / "data"
    config = Config.from_env({}, data_dir=data, extractor="none")
    with live_server(create_app(config, SwitchableEmbedder(minilm))) as url, Client(url) as nexus:
        said = [{"speaker": "user", "content": fact} for fact in FACTS]
        plain = nexus.resolve_session(title="facts", project="plain").id
        nexus.add_episodes(plain, said)
        pinned = nexus.resolve_session(title="facts", project="pinned").id
        stored = nexus.add_episodes(pinned, [*said, {"speaker": "user", "content": PINNED}])
        nexus.update_episode(stored[-1].id, {"pinned": True})
        yield {"url": url, "plain": plain, "pinned": pinned}


class _Standard(RetrieversIntegrationTests):
    params: ClassVar[dict[str, Any]] = {}

    @pytest.fixture(autouse=True)
    def _service(self, served: dict[str, Any]) -> None:
        type(self).params = self.given(served)

    def given(self, served: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return NexusRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def retriever_query_example(self) -> str:
        return "What is my cat allergic to?"


class TestBySessionName(_Standard):
    def given(self, served: dict[str, Any]) -> dict[str, Any]:
        return {"base_url": served["url"], "session": "facts", "project": "plain"}


class TestBySessionId(_Standard):
    def given(self, served: dict[str, Any]) -> dict[str, Any]:
        return {"base_url": served["url"], "session_id": served["plain"]}


class TestWithAPinnedMemory(_Standard):
    """The `k` documents are the best matches, a pinned memory never in their place; asked
    for, the standing ones come after them, marked."""

    def given(self, served: dict[str, Any]) -> dict[str, Any]:
        return {"base_url": served["url"], "session_id": served["pinned"]}

    def test_the_answer_is_within_k_and_the_pinned_memory_after_it(self) -> None:
        found = NexusRetriever(**self.params).invoke(self.retriever_query_example, k=1)
        assert [d.page_content for d in found] == ["Our cat Miso is allergic to salmon"]
        with_standing = NexusRetriever(**self.params, standing=True)
        found = with_standing.invoke(self.retriever_query_example, k=1)
        marked = [(d.page_content, d.metadata.get("standing")) for d in found]
        assert marked[0] == (FACTS[3], None)
        assert (PINNED, "pinned") in marked[1:]
        assert (FACTS[6], "preference") in marked[1:]  # "My favourite walk is ..."

    async def test_call_time_arguments_go_through_ainvoke_too(self) -> None:
        retriever = NexusRetriever(**self.params)
        found = await retriever.ainvoke(self.retriever_query_example, k=1)
        assert [d.page_content for d in found] == [FACTS[3]]
        rule = {"metadata": {"source": "notes"}}
        assert await retriever.ainvoke(self.retriever_query_example, k=2, filter=rule) == []
        assert retriever.invoke(self.retriever_query_example, filter=rule) == []
        with pytest.raises(TypeError, match="k and filter"):
            await retriever.ainvoke(self.retriever_query_example, kk=1)


class _Counted(httpx.HTTPTransport):
    """A real transport that notes each request's path."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle_request(request)


def test_a_retriever_by_name_looks_its_session_up_once(served: dict[str, Any]) -> None:
    counted = _Counted()
    with Client(served["url"], transport=counted) as nexus:
        retriever = NexusRetriever(client=nexus, session="facts", project="plain", k=1)
        for _ in range(3):
            assert len(retriever.invoke("cello")) == 1
    assert counted.paths.count("/context") == 3
    assert len(counted.paths) == 3 + 2  # the first call's look-up: projects, then sessions


def test_a_filter_mistake_is_the_clients_invalid_input_error(served: dict[str, Any]) -> None:
    from nexusai.client import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"filter\.speaker: name at least one"):
        NexusRetriever(base_url=served["url"], session_id=served["plain"], filter={"speaker": []})
    kept = NexusRetriever(
        base_url=served["url"], session_id=served["plain"], filter={"speaker": ["user"]}, k=2
    )
    assert len(kept.invoke("cello")) == 2
