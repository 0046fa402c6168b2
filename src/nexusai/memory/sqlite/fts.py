"""Keyword search: everything that knows about SQLite FTS5 lives in this module.

User text never reaches FTS5 as syntax. `build_fts_query` splits it into letter/number
tokens and quotes each one, so `OR`, `*`, `"`, `NEAR(` or `-x` in a message are searched
for as words, never parsed as operators.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from nexusai.keywords import query_terms, within_budget
from nexusai.models import finds_nothing

# unicode61 folds diacritics so "café" finds "cafe"; porter makes "configure" find
# "configuring". Measured against the alternatives on LoCoMo: see README.
TOKENIZER = "porter unicode61 remove_diacritics 2"

# BM25 column weights behind `ORDER BY rank`: a match in the turn itself counts twice what
# a match in the turn before it (indexed with it, so a reply can be found) counts.
# Measured on LoCoMo: see README.
TURN_WEIGHT, CONTEXT_WEIGHT = 1.0, 0.5


def build_fts_query(text: str) -> str | None:
    """The spec's MATCH expression: each term quoted, joined with OR; None if none survive."""
    terms = query_terms(text)
    return _match(terms) if terms else None


def _match(terms: Sequence[str]) -> str:
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


# The external-content FTS5 table over episodes and the triggers that keep it in sync, so
# that an episode and its index entry commit in the same transaction. Columns: the turn,
# the end of the turn before it, the turn's CJK bigrams (`cjk_text`), and its session as a
# token (`fts_scope`, "s42"), so that a scope is part of the MATCH instead of a JOIN after
# it. The scope column weighs 0: being in scope never changes a score.
TABLE_DDL = f"""
        CREATE VIRTUAL TABLE episodes_fts USING fts5(
            search_text, context_text, search_cjk, fts_scope,
            content='episodes', content_rowid='id', tokenize='{TOKENIZER}'
        );
        INSERT INTO episodes_fts(episodes_fts, rank)
            VALUES ('rank', 'bm25({TURN_WEIGHT}, {CONTEXT_WEIGHT}, {TURN_WEIGHT}, 0.0)');
"""
TRIGGERS_DDL = """
        CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
            INSERT INTO episodes_fts(rowid, search_text, context_text, search_cjk, fts_scope)
                VALUES (new.id, new.search_text, new.context_text, new.search_cjk,
                    new.fts_scope);
        END;
        CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
            INSERT INTO episodes_fts(episodes_fts, rowid, search_text, context_text,
                search_cjk, fts_scope)
                VALUES ('delete', old.id, old.search_text, old.context_text, old.search_cjk,
                    old.fts_scope);
        END;
        CREATE TRIGGER episodes_fts_update AFTER UPDATE OF search_text, context_text,
            search_cjk ON episodes BEGIN
            INSERT INTO episodes_fts(episodes_fts, rowid, search_text, context_text,
                search_cjk, fts_scope)
                VALUES ('delete', old.id, old.search_text, old.context_text, old.search_cjk,
                    old.fts_scope);
            INSERT INTO episodes_fts(rowid, search_text, context_text, search_cjk, fts_scope)
                VALUES (new.id, new.search_text, new.context_text, new.search_cjk,
                    new.fts_scope);
        END;
"""
INDEX_DDL = TABLE_DDL + TRIGGERS_DDL

# What migrations m001 to m009 made, kept as they shipped: a migration never changes.
TABLE_DDL_V1 = f"""
        CREATE VIRTUAL TABLE episodes_fts USING fts5(
            search_text, context_text, content='episodes', content_rowid='id',
            tokenize='{TOKENIZER}'
        );
        INSERT INTO episodes_fts(episodes_fts, rank)
            VALUES ('rank', 'bm25({TURN_WEIGHT}, {CONTEXT_WEIGHT})');
"""
TRIGGERS_DDL_V1 = """
        CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
            INSERT INTO episodes_fts(rowid, search_text, context_text)
                VALUES (new.id, new.search_text, new.context_text);
        END;
        CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
            INSERT INTO episodes_fts(episodes_fts, rowid, search_text, context_text)
                VALUES ('delete', old.id, old.search_text, old.context_text);
        END;
        CREATE TRIGGER episodes_fts_update AFTER UPDATE OF search_text, context_text
        ON episodes BEGIN
            INSERT INTO episodes_fts(episodes_fts, rowid, search_text, context_text)
                VALUES ('delete', old.id, old.search_text, old.context_text);
            INSERT INTO episodes_fts(rowid, search_text, context_text)
                VALUES (new.id, new.search_text, new.context_text);
        END;
"""
INDEX_DDL_V1 = TABLE_DDL_V1 + TRIGGERS_DDL_V1


def integrity_check(conn: sqlite3.Connection) -> bool:
    """True when the FTS index agrees with the episodes table."""
    try:
        conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError:
        return False
    return True


def rebuild_index(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")


def drop_index(conn: sqlite3.Connection) -> None:
    """Removes the FTS table and its triggers (a migration then makes them anew)."""
    for name in ("insert", "delete", "update"):
        conn.execute(f"DROP TRIGGER IF EXISTS episodes_fts_{name}")
    conn.execute("DROP TABLE IF EXISTS episodes_fts")


def search(
    connect: Callable[[], sqlite3.Connection],
    query: str,
    limit: int = 20,
    session_ids: Sequence[int] | None = None,
    budget: int = 0,
) -> list[sqlite3.Row]:
    """Full episode rows matching `query`, best BM25 first, optionally scoped to sessions.

    An empty `session_ids` is an empty scope and finds nothing; None searches everywhere.
    With a `budget`, the query's commonest terms are left out past that many index entries
    (`keywords.within_budget`); 0 is the spec's query, every term.
    `connect` is called only when there is something to search.
    """
    terms = query_terms(query)
    if not terms or finds_nothing(session_ids, limit):
        return []
    conn = connect()
    if budget > 0:
        terms = within_budget(terms, term_counts(conn, terms), budget)
    words = f"{{search_text context_text search_cjk}} : ({_match(terms)})"
    if session_ids is not None and len(session_ids) > MATCH_SCOPE_LIMIT:
        if not _every_session(conn, session_ids):
            return _search_joined(conn, words, limit, session_ids)
        session_ids = None  # a filter that keeps every row: leave it out
    if session_ids is not None:
        scope = " OR ".join(f'"s{int(s)}"' for s in session_ids)
        words = f"fts_scope : ({scope}) AND {words}"
    return conn.execute(_SQL, [words, limit]).fetchall()


# The connection's own FTS5 table tokenizes the query's terms the way the index does
# (porter stems them), and fts5vocab says how many episodes hold each stem: a lookup per
# term, not a read of its entries.
_COUNTING = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.nexus_query USING fts5(term, tokenize='{TOKENIZER}')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.nexus_query_stems"
    " USING fts5vocab(temp, nexus_query, 'instance')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.nexus_index_terms"
    " USING fts5vocab(main, episodes_fts, 'row')",
)


def term_counts(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
    """How many episodes hold each term (a term the tokenizer splits counts as its
    commonest piece)."""
    for ddl in _COUNTING:
        conn.execute(ddl)
    conn.execute("DELETE FROM temp.nexus_query")
    conn.executemany(
        "INSERT INTO temp.nexus_query(rowid, term) VALUES (?, ?)", list(enumerate(terms, 1))
    )
    counts = dict.fromkeys(terms, 0)
    for row, stem in conn.execute("SELECT doc, term FROM temp.nexus_query_stems").fetchall():
        found = conn.execute("SELECT doc FROM temp.nexus_index_terms WHERE term = ?", [stem])
        held = found.fetchone()
        term = terms[row - 1]
        counts[term] = max(counts[term], held[0] if held else 0)
    conn.execute("DELETE FROM temp.nexus_query")
    return counts


# Up to this many sessions, the scope is part of the MATCH, so FTS5 ranks only the rows in
# scope; a larger one is filtered after ranking (the same rows in the same order).
MATCH_SCOPE_LIMIT = 500
# Tied bm25 scores come back in different orders on different SQLite versions, hence the
# id. The rows are read after the sort, for the `limit` ids it kept: sorting every match
# with its whole row took twice as long (measured at 100,000 episodes).
_SQL = (
    "SELECT e.*, -ranked.rank AS score FROM ("
    " SELECT rowid AS id, rank FROM episodes_fts WHERE episodes_fts MATCH ?"
    " ORDER BY rank, rowid LIMIT ?"
    ") ranked JOIN episodes e ON e.id = ranked.id ORDER BY ranked.rank, ranked.id"
)


def _every_session(conn: sqlite3.Connection, session_ids: Sequence[int]) -> bool:
    """Whether a scope names every session in the store, as a project holding all of a
    user's sessions does: then its filter keeps every row and costs a lookup per match."""
    total = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    if len(session_ids) < total:
        return False
    named = conn.execute(
        "SELECT count(*) FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
        [json.dumps([int(s) for s in session_ids])],
    )
    return bool(named.fetchone()[0] == total)


def _search_joined(
    conn: sqlite3.Connection, words: str, limit: int, session_ids: Sequence[int] | None
) -> list[sqlite3.Row]:
    """The scope as a JOIN after FTS5 has ranked every match: for a large scope (and as the
    reference the other forms are tested against)."""
    sql = "SELECT e.*, -fts.rank AS score FROM episodes e JOIN episodes_fts fts ON e.id = fts.rowid"
    sql += " WHERE episodes_fts MATCH ?"
    params: list[object] = [words]
    if session_ids is not None:
        # json_each keeps this one bound parameter however large a project's scope grows.
        sql += " AND e.session_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps([int(s) for s in session_ids]))
    sql += " ORDER BY fts.rank, e.id LIMIT ?"
    params.append(limit)
    return conn.execute(sql, params).fetchall()
