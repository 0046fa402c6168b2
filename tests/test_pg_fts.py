"""The keyword leg on PostgreSQL (pg_fts) on a real PostgreSQL: the spec's query rules,
scoping, and its BM25 against FTS5's on the same rows."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from nexusai import keywords
from nexusai.memory.postgres import fts as pg_fts
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import NewEpisode

Conn = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def pg(pg_pool: ConnectionPool) -> Iterator[Conn]:
    with pg_pool.connection() as conn:
        pg_fts.setup(conn)
        yield conn


def _index(conn: Conn, rows: list[tuple[int, int, str, str]]) -> None:
    pg_fts.index_documents(conn, [(*row, keywords.cjk_text(row[2])) for row in rows])


def test_user_text_with_query_syntax_is_searched_for_never_parsed(pg: Conn) -> None:
    _index(
        pg,
        [
            (1, 1, "Caroline: NEAR the harbor OR the lighthouse", ""),
            (2, 1, "Melanie: a star * rating", ""),
            (3, 1, "nothing to see", ""),
        ],
    )
    for text in ["NEAR( harbor", "OR", '"lighthouse', "-harbor", "star*", "a & !b | <-> :*", "'"]:
        pg_fts.search(pg, text, 10, None)  # no syntax error, whatever it finds
    assert pg_fts.search(pg, "-harbor", 10, None) == [1]
    assert pg_fts.search(pg, 'NEAR( "lighthouse', 10, None) == [1]
    assert pg_fts.search(pg, "rating!", 10, None, "ts_rank_cd") == [2]


def test_scope_stopwords_accents_and_stems(pg: Conn) -> None:
    _index(
        pg,
        [
            (1, 10, "Caroline: we met at the café", ""),
            (2, 20, "Melanie: configuring the violin", ""),
            (3, 20, "Melanie: yes", "Caroline: we met at the café"),
        ],
    )
    assert pg_fts.search(pg, "Cafés?", 10, None) == [1, 3]  # the turn itself ranks first
    assert pg_fts.search(pg, "Cafés?", 10, [20]) == [3]
    assert pg_fts.search(pg, "cafe", 10, []) == []
    assert pg_fts.search(pg, "configure", 10, None) == [2]
    assert pg_fts.search(pg, "what is the and of it", 10, None) == []
    assert pg_fts.search(pg, "violin", 0, None) == []


WORDS = [
    "harbor",
    "violin",
    "glacier",
    "saffron",
    "lantern",
    "orchard",
    "comet",
    "walrus",
    "meadow",
    "falcon",
    "canyon",
    "ember",
    "willow",
    "quartz",
    "tundra",
    "marble",
    "cobalt",
    "jasmine",
    "pepper",
    "thunder",
]


def test_bm25_ranks_as_fts5_does_on_the_same_rows(tmp_path: Path, pg: Conn) -> None:
    """Same rows in both engines (words that both stemmers keep apart, no stopwords), so
    BM25 from PostgreSQL's statistics must order them as FTS5's bm25() does. ts_rank_cd,
    which ignores how rare a word is, is there to show the comparison can fail."""
    rng = random.Random(5)
    weights = [1 / (i + 1) for i in range(len(WORDS))]  # a few common words, many rare
    with SqliteStore(tmp_path / "nexus.db") as store:
        sessions = [store.sessions.create(None, f"chat {s}").id for s in range(4)]
        for session in sessions:
            store.episodes.add(
                session,
                [
                    NewEpisode("user", " ".join(rng.choices(WORDS, weights, k=rng.randint(3, 30))))
                    for _ in range(150)
                ],
            )
        episodes = store.episodes.get_many(store.episodes.ids())
        _index(pg, [(e.id, e.session_id, e.search_text, e.context_text) for e in episodes])
        rankings: tuple[pg_fts.Ranking, ...] = ("bm25", "ts_rank_cd")
        same = dict.fromkeys(rankings, 0)
        queries = [" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(60)]
        for query in queries:
            scope = sessions[:2]
            fts5 = [e.id for e in store.keywords.search(query, 10, scope)]
            for ranking in rankings:
                same[ranking] += fts5 == pg_fts.search(pg, query, 10, scope, ranking)
    assert same["bm25"] >= 0.9 * len(queries), same
    assert same["ts_rank_cd"] < 0.5 * len(queries), same


def test_the_counts_bm25_reads_are_kept_by_the_writes(pg_url: str) -> None:
    """Word document frequencies and the total length, kept by a trigger, equal a count
    made afresh after inserts, edits, deletes and a session's cascade."""
    from nexusai.memory.postgres.store import PgStore

    with PgStore(pg_url) as store:
        first, second = store.sessions.create().id, store.sessions.create().id
        texts = [f"the walrus and the {w} went to Lisbon" for w in ("carpenter", "baker", "cat")]
        ids = [e.id for e in store.episodes.add(first, [NewEpisode("u", t) for t in texts])]
        store.episodes.add(second, [NewEpisode("u", "a walrus in a café")])
        store.episodes.update(ids[0], content="nothing about that animal now")
        store.episodes.delete(ids[1])
        store.sessions.delete(second)
        with store.pool.connection() as conn:
            kept = dict(conn.execute(f"SELECT lexeme, df FROM {pg_fts.TERMS} WHERE df > 0"))
            fresh = dict(
                conn.execute(
                    f"SELECT lexeme, count(*) FROM {pg_fts.TABLE},"
                    " unnest(tsvector_to_array(search_tsv)) AS lexeme GROUP BY lexeme"
                )
            )
            totals = conn.execute(f"SELECT docs, length FROM {pg_fts.TOTALS}").fetchone()
            counted = conn.execute(
                f"SELECT count(*), sum(search_length) FROM {pg_fts.TABLE}"
            ).fetchone()
        assert kept == fresh
        assert kept["walrus"] == 1  # the one edited away and the one deleted are gone
        assert totals is not None
        assert counted is not None
        assert tuple(totals) == tuple(counted)
