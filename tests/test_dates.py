"""Every date field on every face is ISO 8601 text, read one way (`models.parse_time`): a
number or a bare year is a 422 naming the field, never Unix seconds. A filter's one-of list
is never empty, so a forget is never wider than the read it mirrors; `speaker` repeats in a
query string as the docs say; a query string is as strict as a body."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from nexusai.app import create_app
from nexusai.client import Client, InvalidInputError
from nexusai.config import Config
from nexusai.memory.importing import ImportFormatError, read_jsonl
from nexusai.models import parse_time
from nexusai.schemas import FilterIn
from tests.conftest import SwitchableEmbedder
from tests.live_server import live_server

BAD_DATES = [
    *["2026", "1", "2026-05", "yesterday", "", "12/05/2026"],
    # an offset with no time, or any character between date and time: Python's own
    # parser read each as a time (2026-05-01+02:00 as 02:00 UTC)
    *["2026-05-01+02:00", "2026-05-01-02:00", "2026-05-01Z", "2026-05-01x10:00"],
    *["2026-05-01\u00e910:00", "2026-05-01_23", "2026-05-01T10:00:00.1234567890"],
    *["2026-W18", "2026-W18-5", "2026-121"],  # calendar dates only: week and ordinal dates not
]
# Dates with no UTC time a datetime holds: refused on every field, `now` too, naming it.
OUT_OF_RANGE = ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"]


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("2026-05-01", datetime(2026, 5, 1)),
        ("20260501", datetime(2026, 5, 1)),  # ISO 8601 basic: May, not 1970
        ("2026-05-01T10:00:00Z", datetime(2026, 5, 1, 10, tzinfo=UTC)),
        ("20260501T1000Z", datetime(2026, 5, 1, 10, tzinfo=UTC)),
        ("2026-05-01 10:00", datetime(2026, 5, 1, 10)),
        ("2026-05-01T10+02:00", datetime(2026, 5, 1, 8, tzinfo=UTC)),
        ("2026-05-01T10:00:00.5-0130", datetime(2026, 5, 1, 11, 30, 0, 500000, tzinfo=UTC)),
        # Go, .NET and Java write 7 to 9 digits: read to the microsecond
        ("2026-05-01T10:00:00.1234567Z", datetime(2026, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-05-01T10:00:00.123456789+00:00", datetime(2026, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)),
    ],
)
def test_iso_8601_is_read_as_written(text: str, read: datetime) -> None:
    assert parse_time(text) == read


@pytest.mark.parametrize("value", [*BAD_DATES, 2026, 1.5, True, None])
def test_anything_else_is_refused_with_an_example(value: object) -> None:
    with pytest.raises(ValueError, match="2026-05-01"):
        parse_time(value)


def test_a_plus_sent_raw_in_a_query_string_gets_a_hint() -> None:
    with pytest.raises(ValueError, match="%2B"):
        parse_time("2026-05-01T10:00:00 02:00")


@pytest.fixture
def client(config: Config, embedder: SwitchableEmbedder) -> Iterator[httpx.Client]:
    """The service on loopback, for plain HTTP and for our own client alike."""
    with live_server(create_app(config, embedder)) as url, httpx.Client(base_url=url) as http:
        yield http


def _client_of(client: httpx.Client) -> Client:
    return Client(str(client.base_url))


def _stored(client: httpx.Client) -> tuple[int, int]:
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    sid = client.post("/sessions", json={"projectId": project}).json()["id"]
    said = {"speaker": "user", "content": "I moved to Lisbon", "occurredAt": "2026-04-01"}
    episode = client.post(f"/sessions/{sid}/episodes", json=said).json()["id"]
    return sid, episode


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_date_outside_what_utc_holds_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="outside 0001-01-01 to 9999-12-31"):
        parse_time(value)


@pytest.mark.parametrize("bad", [*BAD_DATES, *OUT_OF_RANGE, 2026, 1])
def test_every_date_field_refuses_what_is_not_iso_8601(client: httpx.Client, bad: Any) -> None:
    sid, episode = _stored(client)
    refusals = {
        "expiresAt": client.patch(f"/episodes/{episode}", json={"expiresAt": bad}),
        "occurredAt": client.patch(f"/episodes/{episode}", json={"occurredAt": bad}),
        "episodes[0].expiresAt": client.post(
            f"/sessions/{sid}/episodes",
            json={"episodes": [{"speaker": "user", "content": "x", "expiresAt": bad}]},
        ),
        "now": client.post("/context", json={"sessionId": sid, "message": "hi", "now": bad}),
        "filter.after": client.post(
            "/context", json={"sessionId": sid, "message": "hi", "filter": {"after": bad}}
        ),
    }
    if isinstance(bad, str):  # a query string carries text only
        asked = {"sessionIds": str(sid), "after": bad, "dryRun": "true"}
        refusals["after"] = client.delete("/episodes", params=asked)
        refusals["before"] = client.get("/episodes/search", params={"q": "x", "before": bad})
        refusals["after "] = client.get("/episodes/standing", params={"after": bad})
    for field, answer in refusals.items():
        assert answer.status_code == 422, field
        assert field.strip() in answer.json()["detail"], answer.json()
    # Nothing changed: the episode is there, as it was, and no other was stored.
    kept = client.get(f"/episodes/{episode}").json()
    assert kept["expiresAt"] is None
    assert kept["occurredAt"].startswith("2026-04-01")
    assert len(client.get(f"/sessions/{sid}/episodes").json()) == 1


def test_a_basic_format_date_filters_what_it_says(client: httpx.Client) -> None:
    sid, episode = _stored(client)
    after = {"sessionIds": str(sid), "dryRun": "true"}
    assert client.delete("/episodes", params={**after, "after": "20260501"}).json()["episodes"] == 0
    assert client.delete("/episodes", params={**after, "after": "20260301"}).json()["episodes"] == 1
    patched = client.patch(f"/episodes/{episode}", json={"expiresAt": "2027-01-01"}).json()
    assert patched["expiresAt"] == "2027-01-01T00:00:00.000000Z"


@pytest.mark.parametrize("bad", ["2026", "2026-05-01+02:00", "9999-12-31T23:59:59-01:00"])
def test_an_import_refuses_what_is_not_a_date(bad: str) -> None:
    line = f'{{"session": "a", "speaker": "user", "content": "x", "expiresAt": "{bad}"}}\n'
    with pytest.raises(ImportFormatError, match="expiresAt"):
        list(read_jsonl(io.BytesIO(line.encode())))


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"speaker": []}, "speaker"),
        ({"speaker": [""]}, "speaker"),
        ({"metadata": {"topic": []}}, "metadata.topic"),
        ({"metadata": {"topic": None}}, "metadata.topic"),
        ({"metadata": {"topic": {"a": 1}}}, "metadata.topic"),
        ({"after": 1}, "Unix seconds"),
    ],
)
def test_a_filter_that_would_keep_nothing_is_refused_on_every_face(
    client: httpx.Client, rule: dict[str, Any], says: str
) -> None:
    sid, episode = _stored(client)
    turn = client.post("/context", json={"sessionId": sid, "message": "hi", "filter": rule})
    assert turn.status_code == 422
    assert says in turn.json()["detail"]
    assert "union" not in turn.json()["detail"]  # one message, not pydantic's every branch
    with pytest.raises(ValidationError, match=says):  # what both clients and MCP send
        FilterIn.model_validate(rule)
    with _client_of(client) as nexus, pytest.raises(InvalidInputError, match=says) as refused:
        nexus.forget([sid], filter=rule, dry_run=True)
    assert refused.value.status == 422
    assert refused.value.detail.startswith("filter.")
    assert "Value error" not in refused.value.detail
    assert client.get(f"/episodes/{episode}").status_code == 200


def test_speaker_repeats_in_a_query_string(client: httpx.Client) -> None:
    sid, _ = _stored(client)
    client.post(f"/sessions/{sid}/episodes", json={"speaker": "guide", "content": "Lisbon!"})
    both: list[tuple[str, str | int | float | bool | None]] = [
        ("sessionIds", str(sid)),
        ("speaker", "user"),
        ("speaker", "guide"),
    ]
    found = client.get("/episodes/search", params=[("q", "Lisbon"), *both])
    assert found.status_code == 200
    assert len(found.json()) == 2
    counted = client.delete("/episodes", params=[*both, ("dryRun", "true")])
    assert counted.json()["episodes"] == 2
    assert client.get("/episodes/standing", params=both).status_code == 200
    with _client_of(client) as nexus:
        rule = {"speaker": ["user", "guide"]}
        assert nexus.forget([sid], filter=rule, dry_run=True).episodes == 2
        assert len(nexus.search("Lisbon", [sid], filter=rule)) == 2


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"speaker": "us\x00er"}, "NUL"),
        ({"speaker": ""}, "speaker"),
        ({"metadata.topic": "tra\x00vel"}, "NUL"),
        ({"metadata. ": "x"}, "name a metadata key"),
    ],
)
def test_a_query_string_is_as_strict_as_a_body(
    client: httpx.Client, params: dict[str, str], says: str
) -> None:
    sid, episode = _stored(client)
    for route in ("/episodes/search", "/episodes/standing"):
        refused = client.get(
            route, params={"q": "Lisbon", **params} if "search" in route else params
        )
        assert refused.status_code == 422, route
        assert says in refused.json()["detail"]
    gone = client.delete("/episodes", params={"sessionIds": str(sid), **params})
    assert gone.status_code == 422
    assert client.get(f"/episodes/{episode}").status_code == 200
