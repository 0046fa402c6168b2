from __future__ import annotations

import threading
from dataclasses import fields

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.orchestration.settings import SETTINGS, RuntimeSettings, field_name
from tests.conftest import SwitchableEmbedder

DEFAULTS: dict[str, float | str] = {
    "semanticWeight": 1.0,
    "keywordWeight": 0.0,
    "semanticLimit": 10,
    "recentLimit": 10,
    "entityLimit": 10,
    "keywordBudget": 0,
    "contextBudget": 0,
    "memoryLimit": 200,
    "standingLimit": 10,
    "standingFloor": 0.35,
    "memoryOrder": "rank",
    "timeAware": "off",
    "fusion": "rrf",
}


def test_defaults_from_retrieval_constants(client: TestClient) -> None:
    assert client.get("/settings").json() == DEFAULTS


def test_runtime_settings_have_one_field_per_setting() -> None:
    """`RuntimeSettings` is derived from the one `SETTINGS` table: same names, same order."""
    assert [f.name for f in fields(RuntimeSettings)] == [field_name(s.name) for s in SETTINGS]
    assert RuntimeSettings.from_values(DEFAULTS).to_values() == DEFAULTS


def test_partial_patch(client: TestClient) -> None:
    response = client.patch("/settings", json={"keywordWeight": 1.5})
    assert response.json() == {**DEFAULTS, "keywordWeight": 1.5}
    assert client.get("/settings").json()["keywordWeight"] == 1.5


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"keywordWeight": 5.5}, "keywordWeight must be from 0 to 5"),
        ({"semanticWeight": -1}, "semanticWeight must be from 0 to 5"),
        ({"semanticLimit": 0}, "semanticLimit must be from 1 to 100"),
        ({"standingLimit": 21}, "standingLimit must be from 0 to 20"),
        ({"semanticLimit": 2.5}, "semanticLimit must be a whole number"),
        ({"semanticLimit": 5.0}, "semanticLimit must be a whole number"),  # as ids are
        ({"keywordWeight": "high"}, "keywordWeight must be a number"),
        ({"keywordWeight": True}, "keywordWeight must be a number"),
        ({"rrfK": 10}, "'rrfK' is not a setting"),
    ],
)
def test_rejected_patch_changes_nothing(
    client: TestClient, body: dict[str, object], fragment: str
) -> None:
    response = client.patch("/settings", json={"semanticWeight": 2.0, **body})
    assert response.status_code == 422
    assert fragment in response.json()["detail"]
    assert client.get("/settings").json() == DEFAULTS


def test_settings_survive_a_restart(config: Config, embedder: SwitchableEmbedder) -> None:
    with TestClient(create_app(config, embedder)) as client:
        client.patch("/settings", json={"keywordWeight": 2.0, "recentLimit": 3})
    with TestClient(create_app(config, embedder)) as client:
        assert client.get("/settings").json() == {
            **DEFAULTS,
            "keywordWeight": 2.0,
            "recentLimit": 3,
        }


def test_a_patch_takes_effect_on_the_next_request(client: TestClient) -> None:
    sid = client.post("/sessions").json()["id"]
    client.post(
        f"/sessions/{sid}/episodes",
        json={"episodes": [{"speaker": "user", "content": f"message {i}"} for i in range(5)]},
    )
    ask = {"sessionId": sid, "message": "message"}
    assert len(client.post("/context", json=ask).json()["recent"]) == 5
    client.patch("/settings", json={"recentLimit": 2})
    assert len(client.post("/context", json=ask).json()["recent"]) == 2


def test_concurrent_patches_all_land_and_stay_valid(client: TestClient) -> None:
    errors: list[int] = []

    def patch(i: int) -> None:
        key = ["semanticLimit", "recentLimit", "entityLimit"][i % 3]
        response = client.patch("/settings", json={key: 1 + i % 9})
        if response.status_code != 200:
            errors.append(response.status_code)

    threads = [threading.Thread(target=patch, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = client.get("/settings").json()
    assert set(final) == set(DEFAULTS)
    assert all(1 <= final[k] <= 9 for k in ("semanticLimit", "recentLimit", "entityLimit"))


def test_both_weights_at_zero_are_allowed_and_every_turn_says_why_it_is_empty(
    client: TestClient,
) -> None:
    """The spec's ranges (0 to 5 each) allow it; a turn with no memories says so."""
    sid = client.post("/sessions", json={}).json()["id"]
    client.post(f"/sessions/{sid}/episodes", json={"speaker": "user", "content": "my cat is Tom"})
    assert client.patch("/settings", json={"semanticWeight": 0, "keywordWeight": 0}).is_success
    turn = client.post("/context", json={"sessionId": sid, "message": "what is my cat called?"})
    assert turn.json()["memories"] == []
    assert any("both 0" in w for w in turn.json()["warnings"])
    client.patch("/settings", json={"semanticWeight": 1})
    again = client.post("/context", json={"sessionId": sid, "message": "what is my cat called?"})
    assert not any("both 0" in w for w in again.json()["warnings"])
