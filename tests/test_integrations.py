"""The framework adapters driven by the frameworks' own code paths (a LangChain chain, a
LangGraph graph compiled with the store, an Agents SDK `Runner` with the session) against a
real service; the only stand-in is the agent's LLM, a real OpenAI-protocol server on
loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest

from nexusai.app import create_app
from nexusai.client import AsyncClient, Client
from nexusai.config import Config
from nexusai.schemas import FilterIn
from tests.conftest import SwitchableEmbedder
from tests.live_server import live_server
from tests.openai_stub import openai_stub


@pytest.fixture
def served(config: Config, embedder: SwitchableEmbedder) -> Iterator[str]:
    """The service, with no LLM of its own: only the agent's model needs one (its stub)."""
    with live_server(create_app(config, embedder)) as url:
        yield url


@pytest.fixture
def nexus(served: str) -> Iterator[Client]:
    with Client(served) as client:
        yield client


def _said(client: Client, project: str, title: str, texts: list[str]) -> int:
    sid = client.resolve_session(title=title, project=project).id
    if texts:
        client.add_episodes(sid, [{"speaker": "user", "content": t} for t in texts])
    return sid


def test_retriever_in_a_chain_gives_memories_with_their_ranks(nexus: Client) -> None:
    from langchain_core.runnables import RunnableLambda

    from nexusai.integrations.langchain import NexusRetriever

    _said(nexus, "home", "monday", ["I adopted a puppy called Biscuit", "The report is due Friday"])
    _said(nexus, "home", "tuesday", [])
    retriever = NexusRetriever(client=nexus, session="tuesday", project="home", k=2)

    def pairs(docs: list[Any]) -> list[tuple[str, dict[str, Any]]]:
        return [(d.page_content, d.metadata) for d in docs]

    chain = retriever | RunnableLambda(pairs)
    [(text, meta), *_] = chain.invoke("what is my dog called?")
    assert text == "I adopted a puppy called Biscuit"
    assert meta["semanticRank"] == 1
    assert meta["speaker"] == "user"
    assert set(meta) == {
        "id",
        "sessionId",
        "speaker",
        "occurredAt",
        "score",
        "semanticRank",
        "keywordRank",
    }
    budgeted = NexusRetriever(client=nexus, session="tuesday", project="home", budget=20)
    [only] = budgeted.invoke("what is my dog called?")  # both would cost more than 20
    assert only.page_content == "I adopted a puppy called Biscuit"
    assert 0 < only.metadata["tokens"] <= 20
    theirs = {"speaker": ["assistant"]}  # every episode here is the user's
    narrowed = NexusRetriever(
        client=nexus, session="tuesday", project="home", filter=FilterIn.model_validate(theirs)
    )
    assert narrowed.invoke("what is my dog called?") == []
    missing = NexusRetriever(client=nexus, session="sunday", project="home")
    with pytest.raises(LookupError, match="no session named 'sunday'"):
        missing.invoke("x")
    assert [s.title for s in nexus.list_sessions()] == ["monday", "tuesday"]  # read, not made


def test_chat_history_round_trips_messages(nexus: Client) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from nexusai.integrations.langchain import NexusChatMessageHistory

    history = NexusChatMessageHistory(session="chat", project="home", client=nexus)
    history.add_messages(
        [SystemMessage("be brief"), HumanMessage("hi, I am Ana"), AIMessage("Hello Ana!")]
    )
    history.add_user_message("and Bo says hi")
    calling = AIMessage(
        "", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "c1"}]
    )
    history.add_messages([calling, ToolMessage("sunny, 24 C", tool_call_id="c1")])
    again = NexusChatMessageHistory(history.session_id, client=nexus).messages
    assert [(type(m).__name__, m.content) for m in again] == [
        ("SystemMessage", "be brief"),
        ("HumanMessage", "hi, I am Ana"),
        ("AIMessage", "Hello Ana!"),
        ("HumanMessage", "and Bo says hi"),
        ("AIMessage", ""),
        ("ToolMessage", "sunny, 24 C"),
    ]
    assert again[4].tool_calls == calling.tool_calls  # type: ignore[attr-defined]
    assert again[5].tool_call_id == "c1"  # type: ignore[attr-defined]
    stored = nexus.list_episodes(history.session_id)
    assert stored[4].content == 'calls weather({"city": "Lisbon"})'  # what search sees
    with pytest.raises(ValueError, match="human message with no text"):
        history.add_messages([HumanMessage("")])
    history.clear()
    assert history.messages == []


class State(TypedDict):
    question: str
    answer: str


def test_a_langgraph_graph_remembers_through_the_store(nexus: Client) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    from nexusai.integrations.langgraph import NexusStore

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        store.put(("ana", "memories"), "pet", {"content": "Ana's dog is called Biscuit"})
        store.put(("ana", "memories"), "work", {"content": "Ana works at a bakery", "kind": "job"})
        return {}

    def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        [best, *_] = store.search(("ana",), query=state["question"], limit=2)
        return {"answer": best.value["content"]}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    store = NexusStore(nexus)
    app = graph.compile(store=store)
    out = app.invoke({"question": "what pet does Ana have?", "answer": ""})
    assert out["answer"] == "Ana's dog is called Biscuit"
    got = store.get(("ana", "memories"), "work")
    assert got is not None
    assert got.value == {"content": "Ana works at a bakery", "kind": "job"}
    store.put(("ana", "memories"), "work", {"content": "Ana now works at a school"})
    assert store.get(("ana", "memories"), "work").value["content"] == "Ana now works at a school"  # type: ignore[union-attr]
    assert [i.key for i in store.search(("ana", "memories"), filter={"kind": "job"})] == []
    assert store.list_namespaces(prefix=("ana",)) == [("ana", "memories")]
    store.delete(("ana", "memories"), "pet")
    assert store.get(("ana", "memories"), "pet") is None
    assert asyncio.run(store.aget(("ana", "memories"), "work")) is not None


def test_an_agent_runner_keeps_its_conversation_in_a_session(
    served: str,
) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.tool_context import ToolContext
    from openai import AsyncOpenAI

    from nexusai.integrations.openai_agents import NexusSession, recall_tool

    url = served
    set_tracing_disabled(True)  # no traces leave the machine

    async def run() -> None:
        with openai_stub() as (llm_url, state):
            model = OpenAIChatCompletionsModel("stub", AsyncOpenAI(base_url=llm_url, api_key="x"))
            async with AsyncClient(url) as client:
                session = NexusSession(session="agent", project="home", client=client)
                agent = Agent(name="helper", instructions="Be brief.", model=model)
                first = await Runner.run(agent, "My dog is Biscuit.", session=session)
                assert first.final_output == state.reply
                await Runner.run(agent, "What is my dog called?", session=session)
                sent = state.requests[-1]["body"]["messages"]
                assert any("My dog is Biscuit." in str(m.get("content")) for m in sent)
                items = await session.get_items()
                assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]
                assert (await session.get_items(limit=1))[0]["role"] == "assistant"
                popped = await session.pop_item()
                assert popped is not None
                assert popped["role"] == "assistant"
                tool = recall_tool(session)
                asked = '{"query": "dog name"}'
                call = ToolContext(
                    context=None, tool_name="recall", tool_call_id="c1", tool_arguments=asked
                )
                found = await tool.on_invoke_tool(call, asked)
                assert "My dog is Biscuit." in found
                # Tool traffic is kept whole for the SDK, never recalled; the turn the agent
                # is in (its user message, stored before the tool runs) is left out.
                call_item = {
                    "type": "function_call",
                    "call_id": "c9",
                    "name": "recall",
                    "arguments": '{"query": "Biscuit dog"}',
                }
                output = {
                    "type": "function_call_output",
                    "call_id": "c9",
                    "output": "[2026-12-06] user: My dog is Biscuit. (score 0.03)",
                }
                await session.add_items([call_item, output])
                question = {"role": "user", "content": "Biscuit: what breed is my dog?"}
                await session.add_items([question])
                assert (await session.get_items())[-3:] == [call_item, output, question]
                found = await tool.on_invoke_tool(call, asked)
                lines = found.splitlines()
                assert "My dog is Biscuit." in found
                assert all(
                    line.split("] ")[1].startswith(("user:", "assistant:")) for line in lines
                )
                assert "what breed" not in found
                assert "function_call" not in found
                await session.pop_item()  # the question: the turn is over
                for bad, said in (
                    ('{"q": "dog"}', "recall was called with bad arguments: it takes a JSON"),
                    ('{"query": "' + "x" * 20_000 + '"}', "recall failed: message is 20000"),
                ):
                    wrong = ToolContext(
                        context=None, tool_name="recall", tool_call_id="c2", tool_arguments=bad
                    )
                    assert said in await tool.on_invoke_tool(wrong, bad)
                await session.clear_session()
                assert await session.get_items() == []

    asyncio.run(run())


def test_the_turn_an_agent_is_in_is_the_services_whatever_the_wiring(served: str) -> None:
    """The documented wiring, a tool bound to another `NexusSession` than the run's, and
    finished runs copied in from a session of the app's own all see the same turn."""
    from agents.tool_context import ToolContext

    from nexusai.integrations.openai_agents import NexusSession, recall_tool

    asked = '{"query": "what is my cat called"}'
    call = ToolContext(context=None, tool_name="recall", tool_call_id="c1", tool_arguments=asked)
    said = [
        {"role": "user", "content": "My cat is called Miso."},
        {"role": "assistant", "content": "Miso is a lovely name."},
    ]
    question = {"role": "user", "content": "Miso question: what is my cat called?"}

    async def run() -> None:
        async with AsyncClient(served) as client:
            # Finished runs copied in: the user's question is in the app's own session.
            copied = NexusSession(session="copied", project="wired", client=client)
            await copied.add_items(said)
            found = await recall_tool(copied).on_invoke_tool(call, asked)
            assert "My cat is called Miso." in found
            # A session object per request, the tool bound to another one.
            bound = NexusSession(session="per-request", project="wired2", client=client)
            for items in (said, [question]):
                await NexusSession(
                    session="per-request", project="wired2", client=client
                ).add_items(items)
            found = await recall_tool(bound).on_invoke_tool(call, asked)
            assert "My cat is called Miso." in found
            assert "Miso question" not in found

    asyncio.run(run())


def test_tool_traffic_is_kept_for_the_sdk_and_reaches_no_turn(served: str) -> None:
    """A function call and its output come back from `get_items` in order, and no turn of
    another session of the project puts their JSON in its prompt."""
    from nexusai.integrations.openai_agents import NexusSession

    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "Biscuit sunny 21C"}
    items = [
        {"role": "user", "content": "What is the weather for Biscuit's walk?"},
        call,
        output,
        {"role": "assistant", "content": "Sunny, 21 degrees: a good walk for Biscuit."},
    ]

    async def run() -> None:
        async with AsyncClient(served) as client:
            session = NexusSession(session="walks", project="dogs", client=client)
            await session.add_items(items)
            assert await session.get_items() == items
            assert await session.get_items(2) == items[2:]
            other = (await client.resolve_session(title="later", project="dogs")).id
            turn = await client.context(
                other, "Biscuit weather walk", settings={"keywordWeight": 1}
            )
            assert "function_call" not in turn.prompt
            assert "Sunny, 21 degrees" in turn.prompt
            assert await session.pop_item() == items[-1]
            await session.clear_session()
            assert await session.get_items() == []

    asyncio.run(run())


def _examples() -> list[str]:
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "integrations.md").read_text()
    section = text[text.index("## LangChain and LangGraph") :]
    return [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]


def test_the_documented_examples_run_as_written(served: str) -> None:
    """Each example of docs/integrations.md as written, with only the service's address
    and the local LLM's pointed at this test's."""
    url = served
    examples = _examples()
    assert len(examples) == 3
    with openai_stub() as (llm_url, state):
        for code in examples:
            code = code.replace("http://127.0.0.1:4000", url)
            code = code.replace("http://127.0.0.1:11434/v1", llm_url)
            exec(compile(code, "example", "exec"), {})
        assert state.requests, "the agent's example asked its LLM"
