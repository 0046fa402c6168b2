"""The learned fusion mode through HTTP: its setting, its turns, explain, a ranker trained by
`nexus ranker train` on a labelled set made here, and a bad NEXUS_RANKER."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from rich.console import Console

from nexusai.app import create_app
from nexusai.cli import cli
from nexusai.config import Config
from nexusai.embedders import Embedder
from nexusai.errors import ConfigError
from nexusai.evaluation.datasets import load_jsonl
from nexusai.evaluation.learned import Recipe, fit
from nexusai.evaluation.selection import CANDIDATES
from nexusai.evaluation.training import collect
from nexusai.ranking.features import FEATURES, MEANINGS

# (what the user said, the assistant's echo of the question, the question): in every
# conversation the user's own message holds the answer, and the assistant's reply repeats
# the question's words, so both legs rank the reply first.
FACTS = [
    (
        "I painted it red last weekend, the old blue was peeling",
        "What colour is your bike? Bike colours matter: a bike colour can change everything.",
        "What colour is my bike?",
    ),
    (
        "We finally settled on Biscuit, she is a beagle",
        "What is your dog's name? Naming a dog is hard, dog names stick for life.",
        "What is my dog's name?",
    ),
    (
        "I start at the harbour office on Monday, as a pilot",
        "Where is your new job? A new job and where the job is can be a big change.",
        "Where is my new job?",
    ),
    (
        "Mostly jazz these days, Coltrane on repeat",
        "What music do you like? Music taste says a lot, music you like is personal.",
        "What music do I like?",
    ),
    (
        "Lisbon in May, we booked the flights yesterday",
        "Where is your trip going? Trip plans are fun, a trip needs a place to go.",
        "Where is my trip going?",
    ),
]


def labelled_chats(path: Path, conversations: int = 6) -> Path:
    lines: list[dict[str, Any]] = []
    for c in range(conversations):
        for f, (fact, echo, question) in enumerate(FACTS):
            turn = f"{c}-{f}"
            lines += [
                {
                    "conversation": f"c{c}",
                    "session": "s1",
                    "id": f"u{turn}",
                    "speaker": "user",
                    "content": fact,
                },
                {
                    "conversation": f"c{c}",
                    "session": "s1",
                    "id": f"a{turn}",
                    "speaker": "assistant",
                    "content": echo,
                },
                {"conversation": f"c{c}", "question": question, "evidence": [f"u{turn}"]},
            ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def trained(tmp_path: Path) -> Path:
    out = tmp_path / "ranker.json"
    result = CliRunner().invoke(
        cli,
        [
            "ranker",
            "train",
            "--jsonl",
            str(labelled_chats(tmp_path / "chats.jsonl")),
            "--out",
            str(out),
            "--depth",
            "5",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "learned (cross-validated)" in result.output
    return out


def ask(client: TestClient, session: int, message: str, **settings: Any) -> list[dict[str, Any]]:
    body = {"sessionId": session, "message": message, "explain": True, "settings": settings}
    answer = client.post("/context", json=body)
    assert answer.status_code == 200, answer.text
    memories: list[dict[str, Any]] = answer.json()["memories"]
    return memories


def one_chat(client: TestClient) -> int:
    session: int = client.post("/sessions", json={"title": "t"}).json()["id"]
    fact, echo, _ = FACTS[0]
    episodes = [{"speaker": "user", "content": fact}, {"speaker": "assistant", "content": echo}]
    client.post(f"/sessions/{session}/episodes", json={"episodes": episodes})
    return session


def test_a_trained_ranker_puts_what_it_learned_first(
    trained: Path, config: Config, embedder: Embedder
) -> None:
    app = create_app(
        Config.from_env({}, data_dir=config.data_dir, extractor="none", ranker=trained), embedder
    )
    with TestClient(app) as client:
        session = one_chat(client)
        question = FACTS[0][2]
        rrf = ask(client, session, question, recentLimit=0)
        assert rrf[0]["speaker"] == "assistant"  # both legs like the echo
        learned = ask(client, session, question, recentLimit=0, fusion="learned")
        assert [m["speaker"] for m in learned] == ["user", "assistant"]
        assert [m["placedBy"] for m in learned] == ["ranker", "ranker"]  # RRF's is third
        assert "placedBy" not in rrf[0]
        first = learned[0]
        assert first["score"] > learned[1]["score"]
        assert {"semanticRank", "keywordRank"} <= set(first)
        assert len(first["features"]) == 3
        effects = [abs(f["effect"]) for f in first["features"]]
        assert effects == sorted(effects, reverse=True)
        assert all(f["feature"] in FEATURES for f in first["features"])
        assert all(f["meaning"] == MEANINGS[f["feature"]] for f in first["features"])
        assert 0 < learned[1]["probability"] < first["probability"] < 1
        assert first["probability"] == pytest.approx(1 / (1 + math.exp(-first["score"])))
        assert "probability" not in rrf[0]


def test_a_ranker_trained_on_other_vectors_says_so_in_the_turn(
    trained: Path, config: Config, embedder: Embedder
) -> None:
    """Its cosine features came from another embedder: the turn still ranks, and warns."""
    model = json.loads(trained.read_text())
    assert model["trainedOn"]["embedder"] == embedder.name
    model["trainedOn"]["embedder"] = "local:all-mpnet-base-v2"
    other = trained.with_name("other.json")
    other.write_text(json.dumps(model))
    warned = "trained on local:all-mpnet-base-v2's vectors and this service embeds with"
    for ranker, warns in ((trained, False), (other, True)):
        app = create_app(
            Config.from_env({}, data_dir=config.data_dir, extractor="none", ranker=ranker),
            embedder,
        )
        with TestClient(app) as client:
            session = one_chat(client)
            settings = {"fusion": "learned", "recentLimit": 0}
            body = {"sessionId": session, "message": FACTS[0][2], "settings": settings}
            answer = client.post("/context", json=body).json()
            assert any(warned in w for w in answer["warnings"]) is warns
            assert answer["memories"]
            body["settings"] = {"fusion": "rrf", "recentLimit": 0}
            assert not client.post("/context", json=body).json()["warnings"]


def test_fusion_is_a_setting_validated_like_the_others(client: TestClient) -> None:
    assert client.get("/settings").json()["fusion"] == "rrf"
    refused = client.patch("/settings", json={"fusion": "neural", "semanticLimit": 5})
    assert refused.status_code == 422
    assert refused.json()["detail"] == 'fusion must be "rrf" or "learned", got \'neural\''
    assert client.get("/settings").json()["semanticLimit"] == 10  # a 4xx changes nothing
    assert client.patch("/settings", json={"fusion": "learned"}).json()["fusion"] == "learned"
    assert client.get("/settings").json()["fusion"] == "learned"
    session = one_chat(client)
    bad = client.post(
        "/context", json={"sessionId": session, "message": "bike", "settings": {"fusion": 1}}
    )
    assert bad.status_code == 422
    assert "fusion" in bad.text


def test_learned_turns_ignore_zero_weights_and_keep_to_the_limit(client: TestClient) -> None:
    session = one_chat(client)
    memories = ask(
        client,
        session,
        "bike colour",
        fusion="learned",
        semanticWeight=0,
        keywordWeight=0,
        semanticLimit=1,
        recentLimit=0,
    )
    assert len(memories) == 1
    assert memories[0]["features"]
    answer = client.post(
        "/context",
        json={
            "sessionId": session,
            "message": "bike",
            "settings": {"fusion": "learned", "recentLimit": 0},
        },
    ).json()
    assert answer["warnings"] == []
    assert "features" not in answer["memories"][0]  # without explain


def test_a_missing_or_bad_ranker_stops_the_service_at_start(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=r"NEXUS_RANKER: ranker model .* does not exist"):
        create_app(Config.from_env({"NEXUS_RANKER": str(missing)}, data_dir=tmp_path))
    (tmp_path / "bad.json").write_text('{"format": "nexusai-ranker/1"}')
    with pytest.raises(ConfigError, match="is not a nexusai ranker"):
        create_app(Config.from_env({"NEXUS_RANKER": str(tmp_path / "bad.json")}, data_dir=tmp_path))


def test_nexus_serve_with_a_bad_ranker_stops_in_one_line_and_touches_nothing(
    tmp_path: Path,
) -> None:
    from tests.live_server import free_port

    data = tmp_path / "data"
    env = {"NEXUS_RANKER": str(tmp_path / "nope.json"), "NEXUS_DATA_DIR": str(data)}
    result = CliRunner(env=env).invoke(cli, ["serve", "--port", str(free_port())])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: NEXUS_RANKER: ranker model {tmp_path / 'nope.json'} does not exist"
    ]
    assert not data.exists()


def test_ranker_select_compares_each_way_of_fitting_out_of_fold(tmp_path: Path) -> None:
    chats = labelled_chats(tmp_path / "chats.jsonl")
    result = CliRunner().invoke(cli, ["ranker", "select", "--jsonl", str(chats)])
    assert result.exit_code == 0, result.output
    for candidate in CANDIDATES:
        assert candidate.name in result.output
    assert "worst set" in result.output


def test_a_ranker_fitted_without_features_never_splits_on_them(
    tmp_path: Path, embedder: Embedder
) -> None:
    [chats] = collect(Console(), [load_jsonl(labelled_chats(tmp_path / "c.jsonl"))], 5, embedder)
    unused = ("cosine", "bm25", "semantic_rank")
    ranker = fit(chats.pools, 5, {}, Recipe(unused=unused))
    split_on = {int(f) for tree in ranker.trees for f in tree["feature"] if f >= 0}
    assert split_on  # it learned from the others
    assert not split_on & {FEATURES.index(name) for name in unused}
