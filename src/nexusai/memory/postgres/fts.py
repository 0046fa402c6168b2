"""Keyword search on PostgreSQL: what `fts.py` is to SQLite FTS5, for the PostgreSQL store
(issue #18).

The spec's rules come first and are the same as FTS5's: `keywords.query_terms` splits the
message into letter/number tokens and drops stopwords, and the terms are OR'ed. Each term
reaches PostgreSQL as a bound parameter of `plainto_tsquery`, which reads plain words and
no operators, so `OR`, `*`, `"`, `!`, `&` or `<->` in a message are searched for, never
parsed.

The text search configuration mirrors FTS5's `porter unicode61 remove_diacritics 2`:
accents folded (`unaccent`), English stemming. A turn is indexed with weight A and the end
of the turn before it with weight B, worth half (FTS5's column weights 1.0 and 0.5).

Two rankings:
- `bm25`: Okapi BM25 as FTS5 computes it (k1 1.2, b 0.75, idf floored at 1e-6, the
  columns' weights applied to term frequency), from the table's own statistics, which a
  trigger keeps as rows are written: each word's document frequency, the rows' total
  length and count.
- `ts_rank_cd`: PostgreSQL's cover density, which ignores how rare a term is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Literal, cast

from psycopg import Connection

from nexusai.keywords import query_terms, within_budget
from nexusai.models import finds_nothing

CONFIG = "nexus_english"
K1, B = 1.2, 0.75
TURN_WEIGHT, CONTEXT_WEIGHT = 1.0, 0.5
Ranking = Literal["bm25", "ts_rank_cd"]

SETUP_DDL = f"""
    CREATE EXTENSION IF NOT EXISTS unaccent;
    DO $$ BEGIN
        CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = english);
        ALTER TEXT SEARCH CONFIGURATION {CONFIG}
            ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem;
    EXCEPTION WHEN unique_violation THEN NULL;
    END $$;
"""

# The keyword index beside the episodes, as FTS5's table is beside SQLite's: one row per
# episode, its session (the scope filter), its tsvector and its length in tokens (BM25's
# length norm), filled from the texts the store composes (texts.py). The length counts one
# token more, as FTS5's does for the session token each of its rows carries, so that the
# two engines rank the same rows alike.
TABLE = "episode_keywords"
TABLE_DDL = f"""
    CREATE TABLE IF NOT EXISTS {TABLE} (
        id bigint PRIMARY KEY,
        session_id bigint NOT NULL,
        search_length integer NOT NULL,
        search_tsv tsvector NOT NULL
    );
    CREATE INDEX IF NOT EXISTS {TABLE}_tsv ON {TABLE} USING gin (search_tsv);
    CREATE INDEX IF NOT EXISTS {TABLE}_session ON {TABLE} (session_id);
"""
# One function fills a row, whether the store's trigger calls it on a write (m004) or a
# test or benchmark indexes rows of its own.
UPSERT_FUNCTION_DDL = f"""
    CREATE OR REPLACE FUNCTION {TABLE}_put(
        p_id bigint, p_session bigint, p_search text, p_context text, p_cjk text
    ) RETURNS void LANGUAGE sql AS $$
        INSERT INTO {TABLE} (id, session_id, search_length, search_tsv)
        SELECT p_id, p_session,
            1 + (SELECT coalesce(sum(array_length(positions, 1)), 0) FROM unnest(d.tsv)), d.tsv
        FROM (SELECT
            setweight(to_tsvector('{CONFIG}', p_search || ' ' || p_cjk), 'A')
            || setweight(to_tsvector('{CONFIG}', p_context), 'B') AS tsv) AS d
        ON CONFLICT (id) DO UPDATE SET session_id = EXCLUDED.session_id,
            search_length = EXCLUDED.search_length, search_tsv = EXCLUDED.search_tsv
    $$;
"""
# The store keeps the index current as FTS5's triggers do in SQLite: every write of the
# texts an index sees goes through the function above (a delete cascades by foreign key).
TRIGGER_DDL = f"""
    CREATE FUNCTION {TABLE}_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM {TABLE}_put(NEW.id, NEW.session_id, NEW.search_text, NEW.context_text,
                            NEW.search_cjk);
        RETURN NULL;
    END $$;
    CREATE TRIGGER {TABLE}_insert AFTER INSERT ON episodes
        FOR EACH ROW EXECUTE FUNCTION {TABLE}_sync();
    CREATE TRIGGER {TABLE}_update
        AFTER UPDATE OF session_id, search_text, context_text, search_cjk ON episodes
        FOR EACH ROW EXECUTE FUNCTION {TABLE}_sync();
"""
# BM25 needs how many rows hold each word and the rows' average length. Counting them per
# query grows with the store (a query word in 1 row of 10 costs a tenth of the table), so
# the writes keep the counts, as FTS5's index does: a row trigger on the keyword table.
TERMS, TOTALS = f"{TABLE}_terms", f"{TABLE}_totals"
STATS_DDL = f"""
    CREATE TABLE IF NOT EXISTS {TERMS} (lexeme text PRIMARY KEY, df bigint NOT NULL);
    CREATE TABLE IF NOT EXISTS {TOTALS} (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        docs bigint NOT NULL,
        length bigint NOT NULL
    );
    INSERT INTO {TERMS} (lexeme, df)
        SELECT lexeme, count(*) FROM {TABLE}, unnest(tsvector_to_array(search_tsv)) AS lexeme
        GROUP BY lexeme
        ON CONFLICT (lexeme) DO UPDATE SET df = EXCLUDED.df;
    INSERT INTO {TOTALS} (docs, length)
        SELECT count(*), coalesce(sum(search_length), 0) FROM {TABLE}
        ON CONFLICT (one) DO UPDATE SET docs = EXCLUDED.docs, length = EXCLUDED.length;
    CREATE OR REPLACE FUNCTION {TABLE}_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE {TOTALS} SET docs = docs - 1, length = length - OLD.search_length;
            UPDATE {TERMS} SET df = df - 1
                WHERE lexeme = ANY(tsvector_to_array(OLD.search_tsv));
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            UPDATE {TOTALS} SET docs = docs + 1, length = length + NEW.search_length;
            INSERT INTO {TERMS} (lexeme, df)
                SELECT unnest(tsvector_to_array(NEW.search_tsv)), 1
                ON CONFLICT (lexeme) DO UPDATE SET df = {TERMS}.df + 1;
        END IF;
        RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS {TABLE}_count ON {TABLE};
    CREATE TRIGGER {TABLE}_count AFTER INSERT OR UPDATE OR DELETE ON {TABLE}
        FOR EACH ROW EXECUTE FUNCTION {TABLE}_count();
"""
_UPSERT = (
    f"SELECT {TABLE}_put(%(id)s, %(session_id)s, %(search_text)s, %(context_text)s, %(search_cjk)s)"
)


def setup(conn: Connection[tuple[object, ...]]) -> None:
    """The text search configuration and the table (once per database; replicas starting
    together wait for each other)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('nexus_keywords'))")
    conn.execute(SETUP_DDL)
    conn.execute(TABLE_DDL)
    conn.execute(UPSERT_FUNCTION_DDL)
    conn.execute(STATS_DDL)


def clear(conn: Connection[tuple[object, ...]]) -> None:
    """Empties the index and its counts (a benchmark's fresh start)."""
    conn.execute(f"TRUNCATE {TABLE}, {TERMS}")
    conn.execute(f"UPDATE {TOTALS} SET docs = 0, length = 0")


def index_documents(
    conn: Connection[tuple[object, ...]], rows: Sequence[tuple[int, int, str, str, str]]
) -> None:
    """(episode id, session id, search_text, context_text, search_cjk) into the index."""
    keys = ("id", "session_id", "search_text", "context_text", "search_cjk")
    with conn.cursor() as cursor:
        cursor.executemany(_UPSERT, [dict(zip(keys, row, strict=True)) for row in rows])


def rebuild(conn: Connection[tuple[object, ...]]) -> None:
    """Every episode's row made anew (what `nexus doctor` does when the index disagrees)."""
    conn.execute(f"DELETE FROM {TABLE}")
    conn.execute(
        f"SELECT {TABLE}_put(id, session_id, search_text, context_text, search_cjk) FROM episodes"
    )


def agrees(conn: Connection[tuple[object, ...]]) -> bool:
    """True when every episode has its row, and the index has no other."""
    sql = f"SELECT count(*) FROM episodes e FULL JOIN {TABLE} k ON k.id = e.id"
    row = conn.execute(sql + " WHERE e.id IS NULL OR k.id IS NULL").fetchone()
    return row is not None and row[0] == 0


Connect = Callable[[], AbstractContextManager[Connection[tuple[object, ...]]]]


def search(
    conn: Connection[tuple[object, ...]],
    query: str,
    limit: int,
    session_ids: Sequence[int] | None,
    ranking: Ranking = "bm25",
) -> list[int]:
    """Ids of the episodes matching `query`, best first, ties by id; scoped to the
    sessions given (none for an empty scope, everywhere for None)."""
    found = scored_search(lambda: nullcontext(conn), query, limit, session_ids, ranking)
    return [episode_id for episode_id, _ in found]


def scored_search(
    connect: Connect,
    query: str,
    limit: int,
    session_ids: Sequence[int] | None,
    ranking: Ranking = "bm25",
    budget: int = 0,
    where: tuple[Sequence[str], Sequence[object]] | None = None,
) -> list[tuple[int, float]]:
    """`search` with each episode's score (higher is better); with a `budget`, the
    commonest terms are left out past it (`keywords.within_budget`), as in SQLite. `where`
    (a filter's clauses over the episodes table, with `?` parameters) keeps only the
    episodes it holds, inside the ranking. `connect` is called only when there is
    something to search."""
    terms = query_terms(query)
    if not terms or finds_nothing(session_ids, limit):
        return []
    with connect() as conn:
        if budget > 0:
            terms = within_budget(terms, term_counts(conn, terms), budget)
        tsquery, params = _tsquery(terms)
        params |= {"limit": limit, "sessions": [int(s) for s in session_ids or []]}
        scope = "AND session_id = ANY(%(sessions)s::bigint[])" if session_ids is not None else ""
        if where is not None:
            kept, named = _named(where)
            scope += f" AND id IN (SELECT id FROM episodes WHERE {kept})"
            params |= named
        if ranking == "ts_rank_cd":
            sql = (
                f"SELECT id, ts_rank_cd('{{0, 0, {CONTEXT_WEIGHT}, {TURN_WEIGHT}}}', search_tsv,"
                f" ({tsquery})) AS score FROM {TABLE} WHERE search_tsv @@ ({tsquery}) {scope}"
                " ORDER BY score DESC, id LIMIT %(limit)s"
            )
        else:
            sql = _bm25_sql(tsquery, scope)
        # Put together from constants and placeholders only: user text is a bound parameter.
        rows = conn.execute(sql, params).fetchall()
    return [(cast(int, row[0]), float(cast(float, row[1]))) for row in rows]


def _named(where: tuple[Sequence[str], Sequence[object]]) -> tuple[str, dict[str, object]]:
    """A filter's clauses, their `?` placeholders named (`%(f0)s`, ...) as this module's
    queries bind parameters. The clauses are the store's constants: user values are only
    ever parameters."""
    clauses, values = where
    sql = " AND ".join(f"({clause})" for clause in clauses)
    pieces = sql.split("?")
    if len(pieces) - 1 != len(values):
        raise ValueError("a filter's placeholders and parameters differ in number")
    named = "".join(f"{piece}%(f{i})s" for i, piece in enumerate(pieces[:-1])) + pieces[-1]
    return named, {f"f{i}": value for i, value in enumerate(values)}


def _tsquery(terms: Sequence[str]) -> tuple[str, dict[str, object]]:
    """The OR of the terms as SQL over bound parameters (each read as plain words), and
    those parameters (`terms` too, for BM25's per-term statistics)."""
    sql = " || ".join(f"plainto_tsquery('{CONFIG}', %(t{i})s)" for i in range(len(terms)))
    params: dict[str, object] = {f"t{i}": term for i, term in enumerate(terms)}
    return sql, {**params, "terms": list(terms)}


def own_text_matches(
    conn: Connection[tuple[object, ...]], query: str, ids: Sequence[int]
) -> set[int]:
    """Which of these episodes hold a word of `query` in their own text (weight A), not
    only in the end of the turn before them (weight B)."""
    terms = query_terms(query)
    if not terms or not ids:
        return set()
    tsquery, params = _tsquery(terms)
    params["ids"] = [int(i) for i in ids]
    sql = (
        f"SELECT id FROM {TABLE} WHERE id = ANY(%(ids)s::bigint[])"
        f" AND ts_filter(search_tsv, '{{a}}') @@ ({tsquery})"
    )
    return {cast(int, row[0]) for row in conn.execute(sql, params).fetchall()}


def term_counts(conn: Connection[tuple[object, ...]], terms: Sequence[str]) -> dict[str, int]:
    """How many episodes hold each term, from the counts the trigger keeps (a term the
    parser splits counts as its commonest piece)."""
    sql = f"""
        SELECT term, coalesce(max(t.df), 0) FROM unnest(%(terms)s::text[]) AS term
        LEFT JOIN LATERAL unnest(tsvector_to_array(to_tsvector('{CONFIG}', term))) AS l
            ON true
        LEFT JOIN {TERMS} t ON t.lexeme = l
        GROUP BY term
    """
    rows = conn.execute(sql, {"terms": list(terms)}).fetchall()
    return {str(term): int(cast(int, df)) for term, df in rows}


def _bm25_sql(tsquery: str, scope: str) -> str:
    """FTS5's bm25(): per query lexeme, idf from its document frequency over the whole
    table (as FTS5's statistics are), tf weighted by column, length-normalised."""
    return f"""
        WITH query AS MATERIALIZED (SELECT ({tsquery}) AS q),
        lexemes AS (
            SELECT DISTINCT lexeme FROM unnest(%(terms)s::text[]) AS term,
                unnest(tsvector_to_array(to_tsvector('{CONFIG}', term))) AS lexeme
        ),
        stats AS MATERIALIZED (
            SELECT docs::float8 AS n, length::float8 / greatest(docs, 1) AS avgdl FROM {TOTALS}
        ),
        idf AS MATERIALIZED (  -- once per query, not once per row it is joined to
            SELECT l.lexeme, greatest(1e-6, ln((s.n - df.n + 0.5) / (df.n + 0.5))) AS idf
            FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL (
                SELECT coalesce(max(t.df), 0)::float8 AS n FROM {TERMS} t
                WHERE t.lexeme = l.lexeme
            ) df
        ),
        hits AS (
            SELECT id, search_length, search_tsv FROM {TABLE}, query
            WHERE search_tsv @@ query.q {scope}
        )
        SELECT h.id, sum(idf.idf * f.tf * ({K1} + 1)
                     / (f.tf + {K1} * (1 - {B} + {B} * h.search_length / s.avgdl))) AS score
        FROM hits h
        CROSS JOIN stats s
        CROSS JOIN LATERAL unnest(h.search_tsv) AS u
        JOIN idf ON idf.lexeme = u.lexeme
        CROSS JOIN LATERAL (
            SELECT {TURN_WEIGHT} * count(*) FILTER (WHERE w = 'A')
                 + {CONTEXT_WEIGHT} * count(*) FILTER (WHERE w = 'B') AS tf
            FROM unnest(u.weights) AS w
        ) f
        GROUP BY h.id
        ORDER BY score DESC, h.id
        LIMIT %(limit)s
    """
