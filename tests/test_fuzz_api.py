"""Property-based test of the HTTP API from its own OpenAPI schema: whatever schemathesis
sends, the service answers without a 5xx and within its documented schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.llm import OpenAIChat
from tests.conftest import HTTP_TIMEOUT
from tests.live_server import live_server
from tests.openai_stub import openai_stub


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: LocalEmbedder
) -> Iterator[str]:
    """The schema fuzz runs against each store: SQLite, and a database of its own on the
    session's PostgreSQL."""
    data: Path = tmp_path_factory.mktemp("fuzz")
    url = None
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres")
        name = f"fuzz_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        url = urlsplit(server)._replace(path=f"/{name}").geturl()
    config = Config.from_env({}, data_dir=data, extractor="none", database_url=url)
    # A real LLM endpoint on loopback: without one, chat is a documented 503, which the
    # fuzzer would count as a server error.
    with openai_stub() as (llm_url, _):
        app = create_app(config, minilm, OpenAIChat(llm_url, "m"))
        with live_server(app) as url:
            import httpx

            sid = httpx.post(
                f"{url}/sessions", json={"title": "seed"}, timeout=HTTP_TIMEOUT
            ).json()["id"]
            httpx.post(
                f"{url}/sessions/{sid}/episodes",
                json={"speaker": "user", "content": "seed text"},
                timeout=HTTP_TIMEOUT,
            )
            yield url


def test_no_server_errors_and_documented_responses(served: str) -> None:
    schema = schemathesis.openapi.from_url(f"{served}/openapi.json")
    checked = 0
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an invalid schema fails here
        if operation.path == "/import":  # a raw file body: covered by the importer tests
            continue

        @given(operation.as_strategy())
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            response = case.call(base_url=served, timeout=30)
            case.validate_response(
                response,
                checks=[not_a_server_error, status_code_conformance, response_schema_conformance],
            )

        run()
        checked += 1
    assert checked >= 25
