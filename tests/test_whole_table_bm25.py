"""The whole-table BM25 kept in memory answers exactly as FTS5 does: the same rows, in the
same order, with the same scores to the last bit, through appends, edits and deletes."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from nexusai.keywords import query_terms
from nexusai.memory.repositories.filters import filter_sql
from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.bm25 import WholeTableBM25
from nexusai.memory.sqlite.bm25.changes import PENDING_CHANGES
from nexusai.memory.sqlite.bm25.postings import GROUPED
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import EpisodeFilter, NewEpisode

T = TypeVar("T")
ODD = [
    "running runs ran",  # two terms, one stem: bm25() counts that phrase twice
    "我们住在北京吗",  # CJK bigrams
    'NEAR( "caroline OR melanie* -painting',  # FTS5 syntax, searched as words
    "zzyzx qwertyuiop",  # nothing holds them
]


@pytest.fixture
def conversation(tmp_path: Path, dev_data: Path) -> Iterator[tuple[SqliteStore, list[str]]]:
    sample = json.loads((dev_data / "locomo" / "locomo10.json").read_text())[0]
    store = SqliteStore(tmp_path / "s.db")
    for number in range(1, 8):
        session = store.sessions.create().id
        turns = sample["conversation"][f"session_{number}"]
        store.episodes.add(session, [NewEpisode(t["speaker"], t["text"]) for t in turns])
    store.episodes.add(store.sessions.create().id, [NewEpisode("user", "我们住在北京")])
    yield store, [qa["question"] for qa in sample["qa"][:40]] + ODD
    store.close()  # its copy first: a worker reading behind is stopped before the connections


@pytest.fixture(params=[GROUPED, 2], ids=["grouped-as-shipped", "grouped-from-2"])
def copy_of(
    conversation: tuple[SqliteStore, list[str]], request: pytest.FixtureRequest
) -> Iterator[WholeTableBM25]:
    """A copy that answers however small the store, closed before the store is. This
    store's stems are held by too few rows for the shipped grouping of postings, so the
    copy is also made with postings grouped from 2 on, both ways through every test."""
    bm25 = WholeTableBM25(conversation[0].connection, min_rows=0, grouped=request.param)
    yield bm25
    bm25.close()


def eventually(ask: Callable[[], T | None]) -> T:
    """What `ask` gives once the copy has what it needs (it reads behind the turns)."""
    deadline = time.monotonic() + 30
    while (found := ask()) is None:
        assert time.monotonic() < deadline, "the copy never answered"
        time.sleep(0.01)
    return found


def answered(bm25: WholeTableBM25, query: str, limit: int) -> list[tuple[int, float]]:
    terms = query_terms(query)
    return eventually(lambda: bm25.search(terms, limit))


def by_fts5(store: SqliteStore, query: str, limit: int) -> list[tuple[int, float]]:
    return [(row["id"], row["score"]) for row in fts.search(store.connection, query, limit)]


def same_answers(store: SqliteStore, bm25: WholeTableBM25, queries: Sequence[str]) -> int:
    found = 0
    for query in queries:
        for limit in (5, 40):
            if query_terms(query):
                assert answered(bm25, query, limit) == by_fts5(store, query, limit), query
                found += bool(by_fts5(store, query, limit))
    return found


def test_it_answers_as_fts5_does(
    conversation: tuple[SqliteStore, list[str]], copy_of: WholeTableBM25
) -> None:
    store, queries = conversation
    assert same_answers(store, copy_of, queries) > 60
    assert copy_of._copy is not None
    grouped = sum(len(ids) for p in copy_of._copy.postings.values() for _, ids in p.groups)
    assert (grouped > 50) == (copy_of._grouped == 2), grouped  # both ways were taken


def test_it_keeps_step_with_every_write(
    conversation: tuple[SqliteStore, list[str]], copy_of: WholeTableBM25
) -> None:
    store, queries = conversation
    bm25 = copy_of
    same_answers(store, bm25, queries)
    session = store.sessions.create().id
    # Said twice, and twice again: the rows added share (length, count) pairs, so with
    # postings grouped from 2 the first append makes new groups and the second joins them.
    for _ in range(2):
        store.episodes.add(session, [NewEpisode("Caroline", q) for q in queries[:10] * 2])
        assert same_answers(store, bm25, queries) > 60  # appended: the copy grows
    store.episodes.update(3, content="Caroline painted a lake at the support group")
    assert same_answers(store, bm25, queries) > 60  # edited: made again
    store.episodes.delete(7)
    assert same_answers(store, bm25, queries) > 60


def test_deletes_and_edits_are_applied_to_it_in_place(
    conversation: tuple[SqliteStore, list[str]], copy_of: WholeTableBM25
) -> None:
    """A forget's chunks of deletes, and the edits they make (the turn after a deleted one
    is indexed with its new neighbour), are applied to the copy: it answers at once, as
    FTS5 does, never read again. So are the last rows deleted and rows added after them."""
    store, queries = conversation
    same_answers(store, copy_of, queries)

    def at_once() -> None:
        for query in queries:
            for limit in (5, 40):
                found = copy_of.search(query_terms(query), limit)
                assert found == by_fts5(store, query, limit), query

    for start in range(10, 200, 50):
        store.episodes.delete_many(list(range(start, start + 50, 2)))
        at_once()
    last = fts.index_state(store.connection()).last_id
    store.episodes.delete_many([last, last - 1])
    at_once()
    store.episodes.add(store.sessions.create().id, [NewEpisode("Caroline", q) for q in queries[:5]])
    at_once()  # a copy read anew would have left each of these to FTS5 (None) meanwhile
    left = [row[0] for row in store.connection().execute("SELECT id FROM episodes ORDER BY id")]
    for n in range(PENDING_CHANGES + 6):  # stems no turn asks fall behind, then are dropped
        store.episodes.update(left[n % len(left)], content=f"Caroline went hiking, day {n}")
        assert copy_of.search(query_terms(queries[0]), 5) == by_fts5(store, queries[0], 5)
    assert copy_of._copy is not None
    pending = copy_of._copy.changes
    assert len(pending) <= PENDING_CHANGES
    # What they hold is nothing a garbage collection walks (a forget leaves hundreds).
    assert any(change.fresh for change in pending)
    assert not any(gc.is_tracked(change.fresh) for change in pending)
    assert same_answers(store, copy_of, queries) > 60  # the dropped ones read again
    # Owed several changes at once: a row edited twice, another edited and then deleted.
    store.episodes.update(left[-1], content="Caroline painted the lake")
    store.episodes.update(left[-1], content="Caroline painted the lake again, at dawn")
    store.episodes.update(left[-2], content="Caroline painted a sunrise by the lake")
    store.episodes.delete_many([left[-2]])
    assert same_answers(store, copy_of, [*queries, "painted lake sunrise dawn"]) > 60


def test_a_small_store_is_left_to_fts5(conversation: tuple[SqliteStore, list[str]]) -> None:
    store, queries = conversation
    bm25 = store._bm25  # the store's own, at the default threshold
    assert all(bm25.search(query_terms(q), 20) is None for q in queries[:5])
    assert bm25._worker is None  # nothing is read behind the turns


def test_the_store_uses_it_for_a_whole_table_scope(
    conversation: tuple[SqliteStore, list[str]],
) -> None:
    """Once warm, a search with no scope runs no bm25 ranking in SQLite, and finds what the
    SQL finds."""
    store, queries = conversation
    store._bm25.close()
    store._bm25 = WholeTableBM25(store.connection, min_rows=0)  # a store this small: FTS5
    for query in queries:  # warmed as turns warm it
        answered(store._bm25, query, 20)
    ranked: list[str] = []
    connection = store.connection()
    connection.set_trace_callback(ranked.append)
    try:
        found = {q: [(e.id, e.score) for e in store.keywords.search(q, 20, None)] for q in queries}
    finally:
        connection.set_trace_callback(None)
    assert not [sql for sql in ranked if "episodes_fts MATCH" in sql]
    assert found == {query: by_fts5(store, query, 20) for query in queries}


def test_a_filtered_search_ranks_as_fts5_joined_to_the_filter(
    conversation: tuple[SqliteStore, list[str]], copy_of: WholeTableBM25
) -> None:
    """Over the whole table, the copy ranks only what a filter keeps: the rows and scores
    of FTS5's ranking joined to the same filter, to the last bit."""
    store, queries = conversation
    store._bm25.close()
    store._bm25 = copy_of
    sessions = store.sessions.page(None, limit=100)
    rules = [
        EpisodeFilter(speakers=("Caroline",)),
        EpisodeFilter(after=store.episodes.page(sessions[2].id)[0].occurred_at),
        EpisodeFilter(speakers=("nobody",)),
    ]
    compared = 0
    for rule in rules:
        where = filter_sql(rule)
        for query in queries:
            if not query_terms(query):
                continue
            answered(copy_of, query, 20)  # warmed: the copy holds its words
            joined = fts.search(store.connection, query, 20, None, 0, None, where)
            ranked: list[str] = []
            store.connection().set_trace_callback(ranked.append)
            try:
                found = store.keywords.search(query, 20, None, 0, rule)
            finally:
                store.connection().set_trace_callback(None)
            assert not [sql for sql in ranked if "episodes_fts MATCH" in sql]  # the copy's
            by_copy = [(e.id, e.score) for e in found]
            assert by_copy == [(row["id"], row["score"]) for row in joined], (rule, query)
            compared += len(by_copy)
    assert compared > 500


def test_past_its_cap_it_drops_the_stems_used_longest_ago(
    conversation: tuple[SqliteStore, list[str]],
) -> None:
    store, _ = conversation
    conn = store.connection()
    stem = {word: fts.stems(conn, [word])[0][0] for word in WORDS}
    sizes = {word: len(fts.postings(conn, stem[word])) for word in WORDS}
    assert sizes["caroline"] > sizes["melanie"] >= sizes["painting"] > 0
    bm25 = WholeTableBM25(
        store.connection, min_rows=0, max_entries=sizes["caroline"] + sizes["melanie"]
    )
    try:
        for word in ("caroline", "melanie", "caroline", "painting"):  # caroline used again
            assert answered(bm25, word, 5) == by_fts5(store, word, 5)
        assert bm25._copy is not None
        assert set(bm25._copy.postings) == {stem["caroline"], stem["painting"]}  # not melanie
        assert bm25._copy.entries == sizes["caroline"] + sizes["painting"]
        assert answered(bm25, "melanie painting", 5) == by_fts5(store, "melanie painting", 5)
    finally:
        bm25.close()


WORDS = ("caroline", "melanie", "painting")


def test_a_budget_counts_each_words_rows_from_it_as_fts5_does(
    conversation: tuple[SqliteStore, list[str]], copy_of: WholeTableBM25
) -> None:
    """A `keywordBudget` leaves out the words most rows hold: the copy counts those rows
    as FTS5's index does, so a budgeted search keeps the same words and finds the same."""
    store, queries = conversation
    conn = store.connection()
    checked = 0
    for query in queries:
        terms = query_terms(query)
        if not terms or any(len(pieces) != 1 for pieces in fts.stems(conn, terms)):
            continue
        assert eventually(partial(copy_of.held, terms)) == fts.term_counts(conn, terms), query
        for budget in (10, 60):
            with_copy = fts.search(store.connection, query, 40, None, budget, copy_of)
            assert with_copy == fts.search(store.connection, query, 40, None, budget), query
        checked += 1
    assert checked > 30
    assert copy_of.held(["s1"]) is None  # the scope column's token: FTS5 counts it there


def test_read_ahead_it_answers_every_first_ask(
    conversation: tuple[SqliteStore, list[str]],
) -> None:
    """After the start's reading ahead, a turn's first ask is answered by the copy (not
    left to FTS5 while its words are read behind it), as FTS5 answers it."""
    store, queries = conversation
    bm25 = WholeTableBM25(store.connection, min_rows=0, inline_rows=0)
    try:
        bm25.warm(lambda: True)
        for query in queries[:40]:
            assert bm25.search(query_terms(query), 10) == by_fts5(store, query, 10), query
    finally:
        bm25.close()


def test_stopped_at_once_it_reads_no_words_ahead(
    conversation: tuple[SqliteStore, list[str]],
) -> None:
    store, queries = conversation
    bm25 = WholeTableBM25(store.connection, min_rows=0, inline_rows=0)
    try:
        bm25.warm(lambda: False)
        assert bm25.held(query_terms(queries[0])) is None  # its words: read behind the turn
        assert answered(bm25, queries[0], 10) == by_fts5(store, queries[0], 10)
    finally:
        bm25.close()


def test_a_turn_reads_rare_words_itself(conversation: tuple[SqliteStore, list[str]]) -> None:
    """Words held by few rows are read in the turn that asks for them, which the copy then
    answers; commoner ones are read behind it while FTS5 answers."""
    store, queries = conversation
    rare = WholeTableBM25(store.connection, min_rows=0)
    never = WholeTableBM25(store.connection, min_rows=0, inline_rows=0)
    try:
        for bm25 in (rare, never):
            bm25.warm(lambda: False)  # each row's length, no words
        for query in queries[:20]:
            terms = query_terms(query)
            assert rare.search(terms, 10) == by_fts5(store, query, 10), query
        assert never.search(query_terms(queries[0]), 10) is None
    finally:
        rare.close()
        never.close()


@pytest.mark.parametrize("grouped", [GROUPED, 2], ids=["grouped-as-shipped", "grouped-from-2"])
def test_saved_at_close_it_answers_the_next_start_as_fts5_does(
    conversation: tuple[SqliteStore, list[str]], tmp_path: Path, grouped: int
) -> None:
    """The copy a close wrote is the next start's: every first ask answered from it,
    exactly as FTS5 answers, with rows added, edited and deleted meanwhile; a copy older
    than the log of changes is read anew."""
    store, queries = conversation
    saved = tmp_path / "copy.npz"

    def opened() -> WholeTableBM25:
        bm25 = WholeTableBM25(
            store.connection, min_rows=0, inline_rows=0, grouped=grouped, saved=saved
        )
        bm25.warm(lambda: False)  # what was saved, and no word read from the index
        return bm25

    first = WholeTableBM25(store.connection, min_rows=0, grouped=grouped, saved=saved)
    first.warm(lambda: True)
    first.close()
    assert saved.exists()
    again = opened()
    try:
        for query in queries[:40]:
            assert again.search(query_terms(query), 10) == by_fts5(store, query, 10), query
    finally:
        again.close()
    store.episodes.add(store.sessions.create().id, [NewEpisode("Caroline", queries[0])])
    grown = opened()
    try:
        for query in queries[:40]:
            assert grown.search(query_terms(query), 10) == by_fts5(store, query, 10), query
    finally:
        grown.close()
    store.episodes.update(3, content="Caroline painted a lake at the support group")
    store.episodes.delete(9)
    edited = opened()
    try:  # the edits since, applied to it from the log of changes
        for query in queries[:40]:
            assert edited.search(query_terms(query), 10) == by_fts5(store, query, 10), query
    finally:
        edited.close()
    store.episodes.update(4, content="Melanie ran a charity race for mental health")
    with store.atomic() as conn:  # as if the log had been cut past this edit
        conn.execute("DELETE FROM keyword_changes")
    behind = opened()
    try:
        assert behind.search(query_terms(queries[0]), 10) is None  # read anew, behind
        assert answered(behind, queries[0], 10) == by_fts5(store, queries[0], 10)
    finally:
        behind.close()


def test_an_unreadable_saved_copy_is_read_anew(
    conversation: tuple[SqliteStore, list[str]], tmp_path: Path
) -> None:
    store, queries = conversation
    saved = tmp_path / "copy.npz"
    saved.write_bytes(b"PK\x03\x04 not a whole file")
    bm25 = WholeTableBM25(store.connection, min_rows=0, saved=saved)
    try:
        bm25.warm(lambda: True)
        assert bm25.search(query_terms(queries[0]), 10) == by_fts5(store, queries[0], 10)
    finally:
        bm25.close()
