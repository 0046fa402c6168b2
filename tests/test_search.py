from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusai.memory.store import Store
from nexusai.models import NewEpisode


def add(store: Store, session_id: int, *texts: str) -> list[int]:
    return [e.id for e in store.add_episodes(session_id, [NewEpisode("u", t) for t in texts])]


def add_apart(store: Store, *texts: str) -> list[int]:
    """Each text in a session of its own, so no episode is indexed with another's text."""
    return [add(store, store.create_session().id, text)[0] for text in texts]


def test_none_query_never_touches_sqlite(store: Store) -> None:
    store.close()  # any SQL now would reopen a connection; count them instead
    before = len(store._connections)
    assert store.search_keyword("how do I do it?") == []
    assert len(store._connections) == before


def test_results_are_full_rows_best_first(store: Store) -> None:
    ids = add_apart(
        store,
        "I configured the Qdrant collection yesterday",
        "Qdrant is a vector database",
        "nothing relevant here",
    )
    results = store.search_keyword("How do I configure the Qdrant collection?")
    assert [e.id for e in results] == ids[:2]
    assert results[0].content == "I configured the Qdrant collection yesterday"
    assert results[0].speaker == "u"


def test_stemming_and_diacritics(store: Store) -> None:
    [running, cafe] = add_apart(store, "she was running fast", "meet at the cafe")
    assert [e.id for e in store.search_keyword("runs")] == [running]
    assert [e.id for e in store.search_keyword("café")] == [cafe]


def test_non_latin_text_matches(store: Store) -> None:
    ru, el, fr = add_apart(
        store, "Я люблю программирование", "Καλημέρα κόσμε", "Une crème brûlée délicieuse"
    )
    assert [e.id for e in store.search_keyword("люблю?")] == [ru]
    assert [e.id for e in store.search_keyword("κόσμε")] == [el]
    assert [e.id for e in store.search_keyword("creme brulee")] == [fr]


def test_scoping_never_returns_other_sessions(store: Store) -> None:
    a = store.create_session().id
    b = store.create_session().id
    c = store.create_session().id
    [in_a] = add(store, a, "secret llama plans")
    [in_b] = add(store, b, "secret llama plans")
    add(store, c, "secret llama plans")
    assert {e.id for e in store.search_keyword("llama", 20, [a, b])} == {in_a, in_b}
    assert store.search_keyword("llama", 20, []) == []
    assert len(store.search_keyword("llama", 20, None)) == 3


def test_limit_and_tie_order_by_id(store: Store) -> None:
    ids = add_apart(store, *["same words here"] * 5)
    assert [e.id for e in store.search_keyword("words", 3)] == ids[:3]


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
def test_fts_syntax_is_searched_for_never_parsed(store: Store, query: str, finds: bool) -> None:
    [stored] = add(store, store.create_session().id, "llama OR alpha NOT content")
    found = [e.id for e in store.search_keyword(query)]
    assert found == ([stored] if finds else [])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_no_text_makes_search_raise(store: Store, text: str) -> None:
    if not store.count_episodes():
        add(store, store.create_session().id, "some stored text", "Привет мир", "日本語")
    store.search_keyword(text, 10, [1])


def test_a_reply_is_found_by_the_turn_it_answers(store: Store) -> None:
    question, reply, later = add(
        store,
        store.create_session().id,
        "Did you finish the marathon in Berlin?",
        "Yes, last Sunday!",
        "Unrelated later remark",
    )
    found = [e.id for e in store.search_keyword("Berlin marathon")]
    assert found == [question, reply]  # a match in the turn itself ranks first
    assert later not in found


def test_an_image_caption_is_searchable(store: Store) -> None:
    session = store.create_session().id
    [shared] = [
        e.id
        for e in store.add_episodes(
            session, [NewEpisode("u", "Look at this!", image_caption="a red kayak")]
        )
    ]
    assert [e.id for e in store.search_keyword("kayak")] == [shared]
    assert store.get_episode(shared).content == "Look at this!"
