from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusai import keywords
from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.memory.store import EpisodeStore
from nexusai.models import NewEpisode


def add(store: EpisodeStore, session_id: int, *texts: str) -> list[int]:
    return [e.id for e in store.episodes.add(session_id, [NewEpisode("u", t) for t in texts])]


def add_apart(store: EpisodeStore, *texts: str) -> list[int]:
    """Each text in a session of its own, so no episode is indexed with another's text."""
    return [add(store, store.sessions.create().id, text)[0] for text in texts]


def test_none_query_never_touches_the_database(store: EpisodeStore) -> None:
    store.close()  # any SQL now would reopen a connection (SQLite) or fail (PostgreSQL)
    before = store.open_connections()
    assert store.keywords.search("how do I do it?") == []
    assert store.open_connections() == before


def test_results_are_full_rows_best_first(store: EpisodeStore) -> None:
    ids = add_apart(
        store,
        "I configured the Qdrant collection yesterday",
        "Qdrant is a vector database",
        "nothing relevant here",
    )
    results = store.keywords.search("How do I configure the Qdrant collection?")
    assert [e.id for e in results] == ids[:2]
    assert results[0].content == "I configured the Qdrant collection yesterday"
    assert results[0].speaker == "u"


def test_stemming_and_diacritics(store: EpisodeStore) -> None:
    [running, cafe] = add_apart(store, "she was running fast", "meet at the cafe")
    assert [e.id for e in store.keywords.search("runs")] == [running]
    assert [e.id for e in store.keywords.search("café")] == [cafe]


def test_non_latin_text_matches(store: EpisodeStore) -> None:
    ru, el, fr = add_apart(
        store, "Я люблю программирование", "Καλημέρα κόσμε", "Une crème brûlée délicieuse"
    )
    assert [e.id for e in store.keywords.search("люблю?")] == [ru]
    assert [e.id for e in store.keywords.search("κόσμε")] == [el]
    assert [e.id for e in store.keywords.search("creme brulee")] == [fr]


def test_scoping_never_returns_other_sessions(store: EpisodeStore) -> None:
    a = store.sessions.create().id
    b = store.sessions.create().id
    c = store.sessions.create().id
    [in_a] = add(store, a, "secret llama plans")
    [in_b] = add(store, b, "secret llama plans")
    add(store, c, "secret llama plans")
    assert {e.id for e in store.keywords.search("llama", 20, [a, b])} == {in_a, in_b}
    assert store.keywords.search("llama", 20, []) == []
    assert len(store.keywords.search("llama", 20, None)) == 3


def test_limit_and_tie_order_by_id(store: EpisodeStore) -> None:
    ids = add_apart(store, *["same words here"] * 5)
    assert [e.id for e in store.keywords.search("words", 3)] == ids[:3]


# Each query with whether it must find the stored "llama OR alpha NOT content": it does
# exactly when a word of it, taken as a word, is in that text.
@pytest.mark.parametrize(
    ("query", "finds"),
    [
        ("OR", False),  # a stopword, not an operator
        ("a OR b", False),
        ("NOT x", False),
        ("*", False),
        ('"', False),
        ('unbalanced "quote', False),
        ("NEAR(alpha beta)", True),  # alpha
        ("-x", False),
        ("col:term", False),
        ("content:llama", True),  # content, llama: words, not a column filter
        ("AND AND OR", False),
        ("🦙🦙 llama", True),
        ("^llama", True),
        ("llama*", True),  # llama, not a prefix query
        ("llam*", False),  # a prefix query would have found it
        ("x" * 10_000, False),
        (" ".join(["llama"] * 2000), True),
    ],
)
def test_fts_syntax_is_searched_for_never_parsed(
    store: EpisodeStore, query: str, finds: bool
) -> None:
    [stored] = add(store, store.sessions.create().id, "llama OR alpha NOT content")
    found = [e.id for e in store.keywords.search(query)]
    assert found == ([stored] if finds else [])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_no_text_makes_search_raise(store: EpisodeStore, text: str) -> None:
    if not store.episodes.count():
        add(store, store.sessions.create().id, "some stored text", "Привет мир", "日本語")
    store.keywords.search(text, 10, [1])


def test_a_reply_is_found_by_the_turn_it_answers(store: EpisodeStore) -> None:
    question, reply, later = add(
        store,
        store.sessions.create().id,
        "Did you finish the marathon in Berlin?",
        "Yes, last Sunday!",
        "Unrelated later remark",
    )
    found = [e.id for e in store.keywords.search("Berlin marathon")]
    assert found == [question, reply]  # a match in the turn itself ranks first
    assert later not in found


def test_an_image_caption_is_searchable(store: EpisodeStore) -> None:
    session = store.sessions.create().id
    [shared] = [
        e.id
        for e in store.episodes.add(
            session, [NewEpisode("u", "Look at this!", image_caption="a red kayak")]
        )
    ]
    assert [e.id for e in store.keywords.search("kayak")] == [shared]
    assert store.episodes.get(shared).content == "Look at this!"


def test_chinese_and_japanese_words_are_found_inside_a_clause(store: EpisodeStore) -> None:
    session = store.sessions.create().id
    chinese, japanese, english = (
        e.id
        for e in store.episodes.add(
            session,
            [
                NewEpisode("u", "我的狗叫饼干，我们住在北京"),
                NewEpisode("u", "私は東京に住んでいて、猫を二匹飼っています"),
                NewEpisode("u", "We live in Beijing with a dog called Biscuit"),
            ],
        )
    )
    assert [e.id for e in store.keywords.search("北京")] == [chinese]
    assert [e.id for e in store.keywords.search("饼干")] == [chinese]
    assert [e.id for e in store.keywords.search("我们住在哪里？")][:1] == [chinese]
    assert [e.id for e in store.keywords.search("東京")] == [japanese]
    assert [e.id for e in store.keywords.search("猫を飼っていますか")][:1] == [japanese]
    assert [e.id for e in store.keywords.search("上海")] == []
    assert {e.id for e in store.keywords.search("Beijing 北京")} == {chinese, english}
    assert keywords.query_terms("住在北京") == ["住在", "在北", "北京"]
    assert keywords.query_terms("python编程") == ["编程", "python"]


def test_the_scope_in_the_match_gives_what_the_join_gives(tmp_path: Path, dev_data: Path) -> None:
    """The same rows in the same order as filtering after ranking, on a real conversation."""
    data = dev_data / "locomo" / "locomo10.json"
    sample = json.loads(data.read_text())[0]
    with SqliteStore(tmp_path / "s.db") as store:
        sessions = []
        for number in range(1, 6):
            sid = store.sessions.create().id
            sessions.append(sid)
            turns = sample["conversation"][f"session_{number}"]
            store.episodes.add(sid, [NewEpisode(t["speaker"], t["text"]) for t in turns])
        questions = [qa["question"] for qa in sample["qa"][:40]]
        compared = 0
        for question in questions:
            match = fts.build_fts_query(question)
            assert match is not None
            words = f"{{search_text context_text search_cjk}} : ({match})"
            for scope in (sessions[:1], sessions[1:4], sessions):
                matched = [e.id for e in store.keywords.search(question, 20, scope)]
                joined = fts._search_joined(store.connection(), words, 20, scope)
                assert matched == [row["id"] for row in joined], (question, scope)
                compared += bool(matched)
        assert compared > 60


def test_a_scope_of_every_session_gives_what_the_join_gives(tmp_path: Path, dev_data: Path) -> None:
    """A project holding every session is searched with no filter at all: the same rows in
    the same order as filtering after ranking; a scope that leaves a session out is still
    filtered."""
    sample = json.loads((dev_data / "locomo" / "locomo10.json").read_text())[0]
    turns = [t for n in range(1, 6) for t in sample["conversation"][f"session_{n}"]]
    with SqliteStore(tmp_path / "s.db") as store:
        sessions = [store.sessions.create().id for _ in range(fts.MATCH_SCOPE_LIMIT + 20)]
        for number, turn in enumerate(turns):
            add(store, sessions[number % len(sessions)], turn["text"])
        for qa in sample["qa"][:40]:
            question = qa["question"]
            words = f"{{search_text context_text search_cjk}} : ({fts.build_fts_query(question)})"
            every = store.keywords.search(question, 20, sessions)
            joined = fts._search_joined(store.connection(), words, 20, sessions)
            assert [e.id for e in every] == [row["id"] for row in joined] != []
            assert every == store.keywords.search(question, 20, None)
            top = every[0].session_id  # leave out the session of the best match
            rest = [s for s in sessions if s != top]
            assert all(e.session_id != top for e in store.keywords.search(question, 20, rest))


def test_a_budget_leaves_out_the_commonest_words_and_keeps_the_rarest(
    store: EpisodeStore,
) -> None:
    """Stemmed as the index stems them ("walking" is "walk"), on both stores."""
    common = add_apart(store, *(f"walking the dog number {i}" for i in range(6)))
    rare = add_apart(store, "a heron by the canal", "the herons came back")
    both = add_apart(store, "walked past a heron")[0]
    everything = [e.id for e in store.keywords.search("walk heron", 20)]
    assert set(everything) == {*common, *rare, both}
    # 7 entries for "walk", 3 for "heron": a budget of 5 keeps only the rarest word.
    kept = [e.id for e in store.keywords.search("walk heron", 20, budget=5)]
    assert set(kept) == {*rare, both}
    within = [e.id for e in store.keywords.search("walk heron", 20, budget=10)]
    assert within == everything  # within the budget: the spec's query, rows and order
    # Every word over the budget: the rarest one alone is still searched.
    assert set(e.id for e in store.keywords.search("walk heron", 20, budget=1)) == {*rare, both}


def test_within_budget_keeps_the_query_order() -> None:
    counts = {"walk": 7, "heron": 3, "canal": 1, "dog": 6}
    terms = ["walk", "heron", "canal", "dog"]
    assert keywords.within_budget(terms, counts, 0) == terms
    assert keywords.within_budget(terms, counts, 17) == terms
    assert keywords.within_budget(terms, counts, 4) == ["heron", "canal"]
    assert keywords.within_budget(terms, counts, 10) == ["heron", "canal", "dog"]
    assert keywords.within_budget(["walk", "dog"], counts, 2) == ["dog"]
