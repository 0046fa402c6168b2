from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nexusai.keywords import STOPWORDS, query_terms, tokenize
from nexusai.memory.sqlite.fts import build_fts_query


def test_spec_example_becomes_or_of_quoted_terms() -> None:
    query = build_fts_query("How do I configure the Qdrant collection?")
    assert query == '"configure" OR "qdrant" OR "collection"'


def test_all_stopword_message_gives_none() -> None:
    assert build_fts_query("how do I do it?") is None


def test_empty_and_punctuation_only_give_none() -> None:
    assert build_fts_query("") is None
    assert build_fts_query("  ?!... -- ** ") is None


def test_single_character_tokens_are_dropped() -> None:
    assert build_fts_query("x y z qdrant") == '"qdrant"'


def test_duplicate_tokens_are_dropped_first_occurrence_kept() -> None:
    assert query_terms("Qdrant qdrant QDRANT collection Qdrant") == ["qdrant", "collection"]


def test_meaningful_borderline_words_are_kept() -> None:
    assert query_terms("time good way") == ["time", "good", "way"]
    for word in ("time", "good", "way"):
        assert word not in STOPWORDS


def test_fts_operators_become_plain_terms() -> None:
    query = build_fts_query('cats OR dogs NOT birds NEAR(a b) -x col:term "unbalanced *')
    assert query == ('"cats" OR "dogs" OR "birds" OR "near" OR "col" OR "term" OR "unbalanced"')


def test_split_is_unicode_aware() -> None:
    assert tokenize("Привет, мир! Café-crème Ελληνικά 42") == [
        "привет",
        "мир",
        "café",
        "crème",
        "ελληνικά",
        "42",
    ]


def test_decomposed_accents_stay_in_one_token() -> None:
    assert tokenize("cafe\u0301 ok") == ["café", "ok"]


def test_underscore_and_emoji_split() -> None:
    assert tokenize("snake_case🙂emoji") == ["snake", "case", "emoji"]


@given(st.text())
def test_query_is_none_or_well_formed(text: str) -> None:
    query = build_fts_query(text)
    if query is None:
        return
    for part in query.split(" OR "):
        assert part.startswith('"')
        assert part.endswith('"')
        assert len(part) > 3
