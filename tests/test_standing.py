"""Standing memories: rules and lasting preferences recognised when stored, pinned
episodes, and the `standing` list a turn carries whatever its search found."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool

from nexusai.memory.postgres.migrations import MIGRATIONS as PG_MIGRATIONS
from nexusai.memory.postgres.migrations import apply_migrations as pg_apply_migrations
from nexusai.memory.service import Memory
from nexusai.memory.sqlite.migrations import MIGRATIONS, apply_migrations
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.memory.standing import standing_kind
from nexusai.memory.store import EpisodeStore
from nexusai.models import Episode, NewEpisode
from nexusai.orchestration.chat import build_prompt
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import memory_block
from nexusai.orchestration.settings import DEFAULTS
from nexusai.orchestration.turn import TurnRequest, run_turn
from nexusai.tokens import count_tokens
from tests.conftest import SwitchableEmbedder

RULE = "Always include version numbers when I ask about software dependencies or libraries."
TASTE = "I'm trying to keep my app small, so I prefer simple, minimal dependencies."
FILLER = [
    "We set up the Flask project with a blueprint for the dashboard.",
    "The dashboard loads in 250ms after the caching changes.",
    "Let's add a chart of monthly expenses to the dashboard.",
    "The login page needs a remember-me checkbox.",
    "I moved the database file into the instance folder.",
    "The tests run in about four seconds now.",
]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (RULE, "instruction"),
        ("Please never use emojis in your replies.", "instruction"),
        ("From now on, reply in German.", "instruction"),
        (TASTE, "preference"),
        ("I'm lactose intolerant, so the dairy-free recipe please!", "preference"),
        ("Harry Potter is my favorite book.", "preference"),
        ("No prob! Always here to help.", None),  # a pleasantry, not a rule
        ("Never give up! You're doing great.", None),
        ("Here's a pic of them on my favorite blanket.", None),  # a favourite in passing
        ("How do I make sure the query always returns a list?", None),
        ("I'd rather you use bullet points", "instruction"),
        ("Please use metric units from now on", "instruction"),
        ("Call me Sam from now on", "instruction"),
        ("Don't use emojis", "instruction"),
        ("Always be concise.", "instruction"),
        ("Great, always answer with a packing list", "instruction"),
        ("Don't give up on your dreams!", None),  # a friend's cheer, not a rule
        ("Don't worry, we'll use the other one.", None),
        ("I'll always be there for you.", None),
    ],
)
def test_rules_and_preferences_are_recognised(text: str, kind: str | None) -> None:
    assert standing_kind("user", text) == kind


def test_only_the_user_sets_the_users_rules() -> None:
    """An assistant's or a third person's "Always ..." is a memory, not the user's rule."""
    assert standing_kind("assistant", RULE) is None
    assert standing_kind("Caroline", RULE) is None
    assert standing_kind("Maria", "I'm vegan") is None
    assert standing_kind(" User ", RULE) == standing_kind("human", RULE) == "instruction"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Please keep your answers short", "instruction"),
        ("Call me Sam", "instruction"),
        ("Can you call me back tomorrow?", None),
        ("I'm diabetic", "preference"),
        ("I have type 1 diabetes", "preference"),
        ("Bonjour. Réponds toujours en français", "instruction"),
        ("Antworte immer auf Deutsch", "instruction"),
        ("Siempre responde en español", "instruction"),
        ("Je suis végétarien", "preference"),
        ("Soy alérgico al maní", "preference"),
        ("Je suis toujours fatigué", None),
    ],
)
def test_common_rules_are_recognised(text: str, kind: str | None) -> None:
    assert standing_kind("user", text) == kind


def test_m022_marks_only_the_users_own_rules_of_an_existing_store(
    tmp_path: Path, pg_pool: ConnectionPool
) -> None:
    said = [("Maria", RULE), ("user", "Call me Sam"), ("user", RULE), ("user", "plain")]
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, MIGRATIONS[:21])
    conn.execute("INSERT INTO sessions (id, created_at) VALUES (1, 't')")
    for i, (speaker, text) in enumerate(said, start=1):
        conn.execute(
            "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at)"
            " VALUES (?, 1, ?, ?, ?, 't')",
            (i, speaker, text, f"2026-01-0{i}"),
        )
    conn.execute("UPDATE episodes SET standing = 'instruction' WHERE id IN (1, 3)")
    conn.execute("COMMIT")
    conn.close()
    expected = [None, "instruction", "instruction", None]
    with SqliteStore(path) as store:
        assert "m022_standing_the_users_own" in store.migrations_applied
        assert [e.standing for e in store.episodes.page(1)] == expected
    with pg_pool.connection() as pg:
        pg_apply_migrations(pg, PG_MIGRATIONS[:11])
        pg.execute("INSERT INTO sessions (created_at) VALUES (now())")
        for speaker, text in said:
            pg.execute(
                "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at,"
                " standing) SELECT id, %s, %s, now(), now(), %s FROM sessions",
                [speaker, text, "instruction" if text == RULE else None],
            )
        pg.commit()
        assert pg_apply_migrations(pg, PG_MIGRATIONS)[:1] == ["m012_standing_the_users_own"]
        rows = pg.execute("SELECT standing FROM episodes ORDER BY id").fetchall()
        assert [row[0] for row in rows] == expected


def test_stored_episodes_are_marked_and_edits_mark_them_again(store: EpisodeStore) -> None:
    sid = store.sessions.create().id
    rule, plain = store.episodes.add(sid, [NewEpisode("user", RULE), NewEpisode("user", "hi")])
    assert (rule.standing, plain.standing) == ("instruction", None)
    assert not rule.pinned
    assert store.episodes.update(plain.id, content=TASTE).standing == "preference"
    assert store.episodes.update(rule.id, content="just a note").standing is None


def test_pins_and_standing_ones_are_listed_pinned_first(store: EpisodeStore) -> None:
    project = store.projects.create("p")
    a, b = store.sessions.create(project.id).id, store.sessions.create(project.id).id
    elsewhere = store.sessions.create().id
    [rule] = store.episodes.add(a, [NewEpisode("user", RULE)])
    [note] = store.episodes.add(b, [NewEpisode("user", "a plain note")])
    store.episodes.add(elsewhere, [NewEpisode("user", TASTE)])
    assert store.episodes.standing([a, b], 10) == [rule]
    pinned = store.episodes.update(note.id, pinned=True)
    assert pinned.pinned
    assert pinned.content == note.content
    assert [e.id for e in store.episodes.standing([a, b], 10)] == [note.id, rule.id]
    assert len(store.episodes.standing(None, 10)) == 3
    assert store.episodes.standing([], 10) == []
    assert not store.episodes.update(note.id, pinned=False).pinned
    assert store.episodes.standing([b], 10) == []


def test_a_pin_leaves_the_keyword_index_alone(tmp_path: Path) -> None:
    """Pinning is no edit of the text: the whole-table BM25 copy stays in step."""
    with SqliteStore(tmp_path / "n.db") as store:
        sid = store.sessions.create().id
        [note] = store.episodes.add(sid, [NewEpisode("user", "zebra")])
        edits = store.connection().execute("SELECT edits FROM keyword_edits").fetchall()
        store.episodes.update(note.id, pinned=True)
        after = store.connection().execute("SELECT edits FROM keyword_edits").fetchall()
        assert [tuple(r) for r in after] == [tuple(r) for r in edits]


def test_m014_marks_the_episodes_of_an_existing_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, MIGRATIONS[:13])
    conn.execute("INSERT INTO sessions (id, created_at) VALUES (1, 't')")
    for i, text in enumerate([RULE, "plain", TASTE], start=1):
        conn.execute(
            "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at)"
            " VALUES (?, 1, 'user', ?, ?, 't')",
            (i, text, f"2026-01-0{i}"),
        )
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as store:
        assert store.migrations_applied[:2] == ["m014_standing_and_pins", "m015_expiry"]
        assert [e.standing for e in store.episodes.page(1)] == ["instruction", None, "preference"]


def test_m005_marks_the_episodes_of_an_existing_postgresql(pg_pool: ConnectionPool) -> None:
    with pg_pool.connection() as conn:
        pg_apply_migrations(conn, PG_MIGRATIONS[:4])
        conn.execute("INSERT INTO sessions (created_at) VALUES (now())")
        for text in (RULE, "plain"):
            conn.execute(
                "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at)"
                " SELECT id, 'user', %s, now(), now() FROM sessions",
                [text],
            )
        conn.commit()
        assert pg_apply_migrations(conn, PG_MIGRATIONS[:5]) == ["m005_standing"]
        rows = conn.execute("SELECT standing, pinned FROM episodes ORDER BY id").fetchall()
        assert rows == [("instruction", False), (None, False)]


def test_the_widened_patterns_mark_an_existing_stores_episodes(
    tmp_path: Path, pg_pool: ConnectionPool
) -> None:
    """m019 (PostgreSQL m010): what the patterns read now is marked in a store made before."""
    texts = ["Don't use emojis", "plain", RULE]
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, MIGRATIONS[:18])
    conn.execute("INSERT INTO sessions (id, created_at) VALUES (1, 't')")
    for i, text in enumerate(texts, start=1):
        conn.execute(
            "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at)"
            " VALUES (?, 1, 'user', ?, ?, 't')",
            (i, text, f"2026-01-0{i}"),
        )
    conn.execute("UPDATE episodes SET standing = 'instruction' WHERE id = 3")
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as store:
        assert store.migrations_applied[:1] == ["m019_standing_widened"]
        assert [e.standing for e in store.episodes.page(1)] == ["instruction", None, "instruction"]
    with pg_pool.connection() as pg:
        pg_apply_migrations(pg, PG_MIGRATIONS[:9])
        pg.execute("INSERT INTO sessions (created_at) VALUES (now())")
        for text in texts[:2]:
            pg.execute(
                "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at)"
                " SELECT id, 'user', %s, now(), now() FROM sessions",
                [text],
            )
        pg.commit()
        assert pg_apply_migrations(pg, PG_MIGRATIONS)[:1] == ["m010_standing_widened"]
        rows = pg.execute("SELECT standing FROM episodes ORDER BY id").fetchall()
        assert rows == [("instruction",), (None,)]


@pytest.fixture
def project_client(client: TestClient) -> tuple[TestClient, int]:
    project = client.post("/projects", json={"name": "app"}).json()["id"]
    return client, project


def _session(client: TestClient, project: int, *texts: str) -> tuple[int, list[int]]:
    sid = client.post("/sessions", json={"projectId": project}).json()["id"]
    body = {"episodes": [{"speaker": "user", "content": t} for t in texts]}
    stored = client.post(f"/sessions/{sid}/episodes", json=body).json()["episodes"]
    return sid, [e["id"] for e in stored]


def _turn(client: TestClient, sid: int, message: str, **settings: object) -> dict[str, object]:
    body = {"sessionId": sid, "message": message, "settings": {"recentLimit": 0, **settings}}
    response = client.post("/context", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _warnings(turn: dict[str, object]) -> list[str]:
    warnings = turn["warnings"]
    assert isinstance(warnings, list)
    return [str(w) for w in warnings]


def _ids(items: object) -> list[int]:
    assert isinstance(items, list)
    return [int(item["id"]) for item in items]


def test_a_recognised_rule_is_listed_under_standing(
    project_client: tuple[TestClient, int],
) -> None:
    client, project = project_client
    _, [rule, *_] = _session(client, project, RULE, *FILLER)
    asking, _ = _session(client, project, "hello")
    # Two memories, both nearer the message than the rule, which shares none of its words
    # (and is far from it in meaning: no floor, to show it still comes).
    turn = _turn(
        client, asking, "Add a chart of monthly expenses", semanticLimit=2, standingFloor=0
    )
    assert rule not in _ids(turn["memories"])
    assert _ids(turn["standing"]) == [rule]
    standing: dict[str, Any] = turn["standing"][0]  # type: ignore[index]
    assert standing["standing"] == "instruction"
    assert standing["tokens"] > 0
    assert 0 < standing["similarity"] < 1
    assert "standing" not in _turn(client, asking, "dashboard", semanticLimit=2, standingLimit=0)


# A user's rules and what each governs: a question that shares no words with it and is
# far from it in meaning (cosine 0.10 to 0.32 under MiniLM), the case a floor dropped.
PROFILE = [
    ("I'm allergic to peanuts", "What snack should I bring to the hiking trip?"),
    ("Always include version numbers when I ask about libraries", "Which HTTP client for Python?"),
    ("I'm vegan", "Can you suggest a dinner recipe for tonight?"),
    ("Always answer in French", "What is the capital of Australia?"),
    ("I prefer simple, minimal dependencies", "How should I parse command line arguments?"),
    ("Never use the metric system, I'm in the US", "How tall is the Eiffel Tower?"),
]
RECOMMENDED = {"fusion": "learned", "contextBudget": 1000}


@pytest.mark.parametrize("settings", [{}, RECOMMENDED], ids=["defaults", "recommended"])
def test_a_users_rules_are_a_profile_carried_on_the_questions_they_govern(
    project_client: tuple[TestClient, int], settings: dict[str, object]
) -> None:
    client, project = project_client
    _, [*rules, _] = _session(client, project, *(rule for rule, _ in PROFILE), " ".join(FILLER))
    asking, _ = _session(client, project, "hello")
    for (rule, question), rule_id in zip(PROFILE, rules, strict=True):
        turn = _turn(client, asking, question, **settings)
        assert rule_id in _ids(turn.get("standing", [])), (question, turn.get("standing"))
        assert f"user: {rule}" in str(turn["prompt"])


TASTE_FAR = "My favourite colour is teal."


def test_among_more_tastes_than_fit_the_floor_chooses(
    project_client: tuple[TestClient, int],
) -> None:
    """The `standingFloor`: when the scope holds more recognised preferences than
    `standingLimit`, a taste is carried when the message is near it in meaning."""
    client, project = project_client
    _, [_far, taste, *_] = _session(client, project, TASTE_FAR, TASTE, *FILLER)
    asking, _ = _session(client, project, "hello")
    one = {"standingLimit": 1}
    far = _turn(client, asking, "Add a chart of monthly expenses", **one)
    assert "standing" not in far
    assert any("2 of the user's 2 rules" in w for w in _warnings(far))
    near = _turn(client, asking, "Pin the software dependencies and their libraries", **one)
    assert _ids(near["standing"]) == [taste]
    assert near["standing"][0]["similarity"] >= 0.35  # type: ignore[index]
    both = _turn(client, asking, "Add a chart of monthly expenses", standingLimit=2)
    assert len(_ids(both["standing"])) == 2  # both fit: the profile, whatever the message


def test_among_more_than_fit_a_far_instruction_still_comes(
    project_client: tuple[TestClient, int],
) -> None:
    """The near ones first, then the instructions, health and diet however far: a far
    taste is what is left out."""
    client, project = project_client
    _, [rule, taste, *_] = _session(client, project, RULE, TASTE, *FILLER)
    asking, _ = _session(client, project, "hello")
    far = _turn(client, asking, "Add a chart of monthly expenses", standingLimit=1)
    assert _ids(far["standing"]) == [rule]  # far from the message, and still carried
    near = _turn(client, asking, "Pin the software dependencies", standingLimit=1)
    assert _ids(near["standing"]) == [rule]
    assert taste not in _ids(near["standing"])


TWELVE = [
    "I prefer window seats on planes.",
    "My favourite colour is teal.",
    "I prefer tea to coffee in the morning.",
    "My favourite band is Radiohead.",
    "I'm vegan",
    "I prefer dark mode in every app.",
    "My favourite season is autumn.",
    "I'm allergic to peanuts",
    "I prefer trains to buses.",
    "My favourite sport is tennis.",
    "I prefer paperback books.",
]


@pytest.mark.parametrize("settings", [{}, RECOMMENDED], ids=["defaults", "recommended"])
def test_past_ten_rules_health_and_diet_still_come_and_the_rest_are_counted(
    project_client: tuple[TestClient, int], settings: dict[str, object]
) -> None:
    """Twelve rules and preferences (one pinned): a dinner question is near neither
    "I'm vegan" nor the allergy, and both must still come."""
    client, project = project_client
    _, ids = _session(client, project, "Always answer in English.", *TWELVE)
    client.patch(f"/episodes/{ids[0]}", json={"pinned": True})
    asking, _ = _session(client, project, "hello")
    turn = _turn(client, asking, "Can you suggest a dinner recipe for tonight?", **settings)
    carried = _ids(turn["standing"])
    vegan, peanuts = (
        ids[1 + TWELVE.index("I'm vegan")],
        ids[1 + TWELVE.index("I'm allergic to peanuts")],
    )
    assert {ids[0], vegan, peanuts} <= set(carried)
    assert any("rules and preferences were left out" in w for w in _warnings(turn))


def test_the_floor_chooses_at_semantic_weight_zero_too(
    project_client: tuple[TestClient, int],
) -> None:
    """A keyword-only turn with no entities still ranks the standing ones by the message:
    the newest taste, far from it, is not carried because no vector was made."""
    client, project = project_client
    _, [_far, taste, *_] = _session(client, project, TASTE_FAR, TASTE, *FILLER)
    asking, _ = _session(client, project, "hello")
    keyword_only = {"standingLimit": 1, "semanticWeight": 0, "keywordWeight": 1, "entityLimit": 0}
    near = _turn(
        client, asking, "Pin the software dependencies and their libraries", **keyword_only
    )
    assert _ids(near["standing"]) == [taste]
    far = _turn(client, asking, "Add a chart of monthly expenses", **keyword_only)
    assert "standing" not in far  # neither is near it: the default turn carries none


def test_a_larger_budget_never_gives_less_and_a_pinned_one_that_does_not_fit_is_named(
    project_client: tuple[TestClient, int],
) -> None:
    client, project = project_client
    facts = [f"Fact {i}: the {w} is kept in drawer {i}" for i, w in enumerate(["key"] * 40)]
    rules = [f"Always mention drawer {i} when I ask about keys" for i in range(8)]
    pin = "Remember that the spare key for the shed is under the blue flower pot"
    sid, ids = _session(client, project, *facts, *rules, pin)
    client.patch(f"/episodes/{ids[-1]}", json={"pinned": True})
    before: set[int] = set()
    for budget in range(5, 160, 5):
        for fusion in ("rrf", "learned"):
            turn = _turn(client, sid, "where is the key?", contextBudget=budget, fusion=fusion)
            given = set(_ids(turn["memories"])) | set(_ids(turn.get("standing", [])))
            if fusion == "learned":
                assert before <= given, (budget, before - given)
                before = given
            if ids[-1] not in given:
                assert any(f"pinned episode {ids[-1]}" in w for w in turn["warnings"])  # type: ignore[attr-defined]


def test_a_rule_the_search_also_found_stays_under_standing_and_is_said_once(
    project_client: tuple[TestClient, int],
) -> None:
    """Without a budget, a rule among the spec's memories is listed under `standing` as
    well, so the prompt's "kept in mind" block has it; the prompt gives it once."""
    client, project = project_client
    _, [rule, *_] = _session(client, project, RULE, *FILLER)
    asking, _ = _session(client, project, "hello")
    turn = _turn(client, asking, "version numbers of software dependencies and libraries")
    assert rule in _ids(turn["memories"])  # the spec's list, unchanged
    assert _ids(turn["standing"]) == [rule]
    context = Context(
        session_id=asking,
        message="libraries?",
        recent=[],
        memories=[
            FusedEpisode(Episode(rule, 1, "user", RULE, "2026-01-01", "", {}), 0.1, {"semantic": 1})
        ],
        standing=[FusedEpisode(Episode(rule, 1, "user", RULE, "2026-01-01", "", {}), 1)],
    )
    block = memory_block(context)
    assert block.count(RULE) == 1
    assert "kept in mind" in block


def test_a_budget_too_small_says_what_it_left_out(
    project_client: tuple[TestClient, int],
) -> None:
    client, project = project_client
    _session(client, project, RULE, *FILLER)
    asking, _ = _session(client, project, "hello")
    for fusion in ("rrf", "learned"):
        asked = {"contextBudget": 8, "fusion": fusion, "standingFloor": 0}
        turn = _turn(client, asking, "dashboard chart", **asked)
        assert turn["memories"] == []
        assert "standing" not in turn  # the rule is over a quarter of 8 tokens
        said = " ".join(turn["warnings"])  # type: ignore[arg-type]
        assert "did not fit" in said
        assert "left room for no memory" in said
    roomy = _turn(client, asking, "dashboard chart", contextBudget=1000, standingFloor=0)
    assert roomy["warnings"] == []


def test_a_pinned_episode_comes_back_whatever_the_message(
    project_client: tuple[TestClient, int],
) -> None:
    client, project = project_client
    sid, ids = _session(client, project, *FILLER)
    pinned = client.patch(f"/episodes/{ids[4]}", json={"pinned": True}).json()
    assert pinned["pinned"] is True
    assert pinned["content"] == FILLER[4]
    asked: list[dict[str, object]] = [
        {"semanticLimit": 2},
        {"semanticLimit": 2, "contextBudget": 200},
        {"fusion": "learned", "contextBudget": 60},
    ]
    for settings in asked:
        turn = _turn(client, sid, "monthly expenses chart", **settings)
        assert _ids(turn["standing"])[0] == ids[4], settings
        assert ids[4] not in _ids(turn["memories"])
        assert turn["standing"][0]["similarity"] is None  # type: ignore[index]
    # Found by the search too, it is still listed under standing (the prompt says it once).
    turn = _turn(client, sid, "monthly expenses chart")
    assert ids[4] in _ids(turn["memories"])
    assert _ids(turn["standing"]) == [ids[4]]
    client.patch(f"/episodes/{ids[4]}", json={"pinned": False})
    assert "standing" not in _turn(client, sid, "monthly expenses chart", semanticLimit=2)


def test_a_turn_with_standing_ones_never_exceeds_its_budget(
    project_client: tuple[TestClient, int],
) -> None:
    client, project = project_client
    long_pin = "Remember the whole plan: " + "step after careful step, " * 60
    sid, ids = _session(client, project, RULE, TASTE, long_pin, *FILLER)
    client.patch(f"/episodes/{ids[2]}", json={"pinned": True})
    for budget in (20, 80, 400, 2000):
        turn = _turn(client, sid, "which libraries for the dashboard?", contextBudget=budget)
        given = [*turn["memories"], *turn.get("standing", [])]  # type: ignore[misc]
        lines = sum(m["tokens"] for m in given)
        sections = str(turn["prompt"]).split("\n\nKnown entities:")[0]
        assert lines <= turn["tokens"] == count_tokens(sections) <= budget
        recognised = [m for m in turn.get("standing", []) if not m["pinned"]]  # type: ignore[attr-defined]
        assert sum(m["tokens"] for m in recognised) <= budget // 4


def test_pinning_is_checked_and_a_refusal_changes_nothing(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["id"]
    body = {"speaker": "user", "content": "note"}
    episode = client.post(f"/sessions/{sid}/episodes", json=body).json()["id"]
    refused = client.patch(f"/episodes/{episode}", json={"pinned": "yes"})
    assert refused.status_code == 422
    assert "pinned" in refused.text
    assert client.get(f"/episodes/{episode}").json()["pinned"] is False
    assert client.patch("/episodes/999", json={"pinned": True}).status_code == 404
    listed = client.get("/episodes/standing", params={"sessionIds": str(sid)})
    assert listed.status_code == 200
    assert listed.json() == []


def test_the_chat_prompt_carries_the_standing_ones(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    sid = memory.store.sessions.create().id
    memory.add_episodes(sid, [NewEpisode("user", t) for t in (RULE, *FILLER)])
    settings = replace(DEFAULTS, recent_limit=0, semantic_limit=2, standing_floor=0.0)
    context = run_turn(memory, embedder, settings, TurnRequest(sid, "a chart of monthly expenses"))
    assert [m.episode.content for m in context.standing] == [RULE]
    system = build_prompt(context)[0]["content"]
    assert "What the user asked to be kept in mind:" in system
    assert RULE in system


def test_a_turn_sorts_the_standing_episodes_by_their_index_alone(tmp_path: Path) -> None:
    """Pinned first, then the newest, of each session: the order is in the index, so a
    scope of many sessions reads no row to sort (20 ms a turn at 1,000,000 episodes)."""
    with SqliteStore(tmp_path / "nexus.db") as store:
        columns = store.connection().execute("PRAGMA index_info(episodes_standing)").fetchall()
        assert [row[2] for row in columns] == ["session_id", "pinned", "occurred_at"]
