"""Keyword search: everything that knows about SQLite FTS5 lives in this module.

User text never reaches FTS5 as syntax. `build_fts_query` splits it into letter/number
tokens and quotes each one, so `OR`, `*`, `"`, `NEAR(` or `-x` in a message are searched
for as words, never parsed as operators.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from nexusai.keywords import query_terms, within_budget
from nexusai.memory.repositories.columns import episode_columns
from nexusai.models import finds_nothing, now_text

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


def own_text_matches(conn: sqlite3.Connection, query: str, ids: Sequence[int]) -> set[int]:
    """Which of these episodes hold a word of `query` in their own text, not only in the
    end of the turn before them (which is indexed with each)."""
    terms = query_terms(query)
    if not terms or not ids:
        return set()
    words = f"{{search_text search_cjk}} : ({_match(terms)})"
    rows = conn.execute(
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?"
        " AND rowid IN (SELECT value FROM json_each(?))",
        (words, json.dumps([int(i) for i in ids])),
    )
    return {int(row[0]) for row in rows}


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


class WholeTable(Protocol):
    """What answers a query over the whole table without FTS5 ranking it (`bm25`)."""

    def search(
        self, terms: Sequence[str], limit: int, only: npt.NDArray[np.int64] | None = None
    ) -> list[tuple[int, float]] | None: ...

    def held(self, terms: Sequence[str]) -> dict[str, int] | None:
        """`term_counts`, when it knows them."""
        ...


def search(
    connect: Callable[[], sqlite3.Connection],
    query: str,
    limit: int = 20,
    session_ids: Sequence[int] | None = None,
    budget: int = 0,
    whole_table: WholeTable | None = None,
    where: tuple[Sequence[str], Sequence[object]] | None = None,
    kept: Callable[[], Sequence[int]] | None = None,
) -> list[sqlite3.Row]:
    """Full episode rows matching `query`, best BM25 first, optionally scoped to sessions.

    An empty `session_ids` is an empty scope and finds nothing; None searches everywhere.
    With a `budget`, the query's commonest terms are left out past that many index entries
    (`keywords.within_budget`); 0 is the spec's query, every term. A search of the whole
    table goes to `whole_table` first, which gives the same rows in the same order.
    `where` (a filter's clauses over the episodes table, and their parameters) is joined
    to the ranking, so that `limit` rows it keeps come back whenever that many match;
    `kept` reads the live rows it keeps, for the whole-table copy to rank among.
    `connect` is called only when there is something to search.
    """
    terms = query_terms(query)
    if not terms or finds_nothing(session_ids, limit):
        return []
    conn = connect()
    if budget > 0:
        held = whole_table.held(terms) if whole_table is not None else None
        terms = within_budget(terms, term_counts(conn, terms) if held is None else held, budget)
    words = f"{{search_text context_text search_cjk}} : ({_match(terms)})"
    if where is not None:
        return _filtered(conn, words, terms, limit, session_ids, where, whole_table, kept)
    return _ranked(conn, words, terms, limit, session_ids, whole_table)


def _filtered(
    conn: sqlite3.Connection,
    words: str,
    terms: Sequence[str],
    limit: int,
    session_ids: Sequence[int] | None,
    where: tuple[Sequence[str], Sequence[object]],
    whole_table: WholeTable | None,
    kept: Callable[[], Sequence[int]] | None,
) -> list[sqlite3.Row]:
    """A filtered search, by the fastest form for its scope (as `_ranked` chooses): over
    the whole table, the whole-table copy ranks only the rows the filter keeps (read from
    the episodes' indexed columns); a small scope goes inside the MATCH; else FTS5 ranks
    every match, joined to the scope and the filter. The same rows in the same order every
    way: scores are the whole table's."""
    if session_ids is None and whole_table is not None and kept is not None:
        scored = whole_table.search(terms, limit, np.array(kept(), dtype=np.int64))
        if scored is not None:
            return _rows_of(conn, scored)
    if session_ids is not None and len(session_ids) <= MATCH_SCOPE_LIMIT:
        scope = " OR ".join(f'"{scope_token(s)}"' for s in session_ids)
        return _search_joined(conn, f"fts_scope : ({scope}) AND {words}", limit, None, where)
    return _search_joined(conn, words, limit, session_ids, where)


def _ranked(
    conn: sqlite3.Connection,
    words: str,
    terms: Sequence[str],
    limit: int,
    session_ids: Sequence[int] | None,
    whole_table: WholeTable | None,
) -> list[sqlite3.Row]:
    """The unfiltered search, by the fastest form for its scope: the whole-table copy, the
    scope inside the MATCH, or a join for a large one."""
    if session_ids is not None and len(session_ids) > MATCH_SCOPE_LIMIT:
        if not _every_session(conn, session_ids):
            return _search_joined(conn, words, limit, session_ids)
        session_ids = None  # a filter that keeps every row: leave it out
    if session_ids is None and whole_table is not None:
        scored = whole_table.search(terms, limit)
        if scored is not None:
            return _rows_of(conn, scored)
    if session_ids is not None:
        scope = " OR ".join(f'"{scope_token(s)}"' for s in session_ids)
        words = f"fts_scope : ({scope}) AND {words}"
    return conn.execute(_SQL, [words, limit, now_text()]).fetchall()


def _rows_of(conn: sqlite3.Connection, scored: Sequence[tuple[int, float]]) -> list[sqlite3.Row]:
    """The rows of `scored`, in its order, each with its score (bound as a parameter, so
    the double is the one computed)."""
    if not scored:
        return []
    values = ", ".join("(?, ?, ?)" for _ in scored)
    params = [value for n, (row_id, score) in enumerate(scored) for value in (n, row_id, score)]
    return conn.execute(
        f"WITH scored(n, id, score) AS (VALUES {values})"
        f" SELECT {_EPISODE}, scored.score AS score FROM scored JOIN episodes e ON e.id = scored.id"
        f" WHERE {_LIVE} ORDER BY scored.n",
        [*params, now_text()],
    ).fetchall()


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
    commonest piece). Counted over every column, the scope's too: for any term but a
    scope token (`is_scope_token`), the rows that hold it in a searched column."""
    counts = dict.fromkeys(terms, 0)
    for term, pieces in zip(terms, stems(conn, terms), strict=True):
        for stem in pieces:
            found = conn.execute("SELECT doc FROM temp.nexus_index_terms WHERE term = ?", [stem])
            held = found.fetchone()
            counts[term] = max(counts[term], held[0] if held else 0)
    return counts


def rows_holding(conn: sqlite3.Connection, stem: str) -> int:
    """How many rows hold a stem (as the index holds it), in any column."""
    for ddl in _COUNTING:
        conn.execute(ddl)
    held = conn.execute("SELECT doc FROM temp.nexus_index_terms WHERE term = ?", [stem])
    row = held.fetchone()
    return int(row[0]) if row else 0


def stems_by_rows(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """Every stem a searched column holds, with how many rows hold it, commonest first:
    a read of the whole index's term list (a quarter of a second at 100,000 rows)."""
    for ddl in _COUNTING:
        conn.execute(ddl)
    found = conn.execute("SELECT term, doc FROM temp.nexus_index_terms ORDER BY doc DESC, term")
    return [(str(term), int(rows)) for term, rows in found if not is_scope_token(term)]


def scope_token(session_id: int) -> str:
    """A session as the scope column holds it (`'s' || session_id`, migration m010)."""
    return f"s{int(session_id)}"


def is_scope_token(stem: str) -> bool:
    """Whether the scope column may hold `stem`."""
    return _SCOPE_TOKEN.fullmatch(stem) is not None


_SCOPE_TOKEN = re.compile(r"s\d+")
# Up to this many sessions, the scope is part of the MATCH, so FTS5 ranks only the rows in
# scope; a larger one is filtered after ranking (the same rows in the same order).
MATCH_SCOPE_LIMIT = 500
# Tied bm25 scores come back in different orders on different SQLite versions, hence the
# id. The rows are read after the sort, for the `limit` ids it kept: sorting every match
# with its whole row took twice as long (measured at 100,000 episodes).
# An episode past its `expires_at` is never returned (the upkeep deletes it soon after).
_LIVE = "(e.expires_at IS NULL OR e.expires_at > ?)"
_EPISODE = episode_columns("e")  # what a search gives of each episode it found
_SQL = (
    f"SELECT {_EPISODE}, -ranked.rank AS score FROM ("
    " SELECT rowid AS id, rank FROM episodes_fts WHERE episodes_fts MATCH ?"
    " ORDER BY rank, rowid LIMIT ?"
    f") ranked JOIN episodes e ON e.id = ranked.id WHERE {_LIVE}"
    " ORDER BY ranked.rank, ranked.id"
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
    conn: sqlite3.Connection,
    words: str,
    limit: int,
    session_ids: Sequence[int] | None,
    where: tuple[Sequence[str], Sequence[object]] = ((), ()),
) -> list[sqlite3.Row]:
    """The scope (and a filter's clauses) as a JOIN after FTS5 has ranked every match: for
    a large scope or a filter (and as the reference the other forms are tested against)."""
    sql = f"SELECT {_EPISODE}, -fts.rank AS score FROM episodes e"
    sql += " JOIN episodes_fts fts ON e.id = fts.rowid"
    sql += f" WHERE episodes_fts MATCH ? AND {_LIVE}"
    params: list[object] = [words, now_text()]
    clauses, values = where
    for clause in clauses:
        sql += f" AND {clause}"
    params += values
    if session_ids is not None:
        # json_each keeps this one bound parameter however large a project's scope grows.
        sql += " AND e.session_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps([int(s) for s in session_ids]))
    sql += " ORDER BY fts.rank, e.id LIMIT ?"
    params.append(limit)
    return conn.execute(sql, params).fetchall()


# -- what the in-memory BM25 (`memory.sqlite.bm25`) reads of the index ------------------

# Every edit or delete of an indexed row bumps this count (an insert does not: new rows are
# found by their ids), so a copy of the index in memory knows when it is out of date.
EDITS_DDL = """
        CREATE TABLE keyword_edits (id INTEGER PRIMARY KEY CHECK (id = 1), edits INTEGER NOT NULL);
        INSERT INTO keyword_edits (id, edits) VALUES (1, 0);
        CREATE TRIGGER keyword_edits_update AFTER UPDATE OF search_text, context_text,
            search_cjk ON episodes BEGIN
            UPDATE keyword_edits SET edits = edits + 1 WHERE id = 1;
        END;
        CREATE TRIGGER keyword_edits_delete AFTER DELETE ON episodes BEGIN
            UPDATE keyword_edits SET edits = edits + 1 WHERE id = 1;
        END;
"""
# Which row each edit or delete of an indexed row touched, by its number in
# `keyword_edits`: the whole-table BM25 copy applies them in place instead of reading the
# whole index again. Only the latest CHANGES_KEPT are kept; a copy further behind is read anew.
CHANGES_KEPT = 200_000
_LOGGED = f"""
            UPDATE keyword_edits SET edits = edits + 1 WHERE id = 1;
            INSERT INTO keyword_changes (edit, episode_id)
                SELECT edits, {{row}}.id FROM keyword_edits WHERE id = 1;
            DELETE FROM keyword_changes
                WHERE edit <= (SELECT edits FROM keyword_edits WHERE id = 1) - {CHANGES_KEPT};
"""
CHANGES_DDL = f"""
        CREATE TABLE keyword_changes (edit INTEGER PRIMARY KEY, episode_id INTEGER NOT NULL);
        DROP TRIGGER keyword_edits_update;
        DROP TRIGGER keyword_edits_delete;
        CREATE TRIGGER keyword_edits_update AFTER UPDATE OF search_text, context_text,
            search_cjk ON episodes BEGIN {_LOGGED.format(row="NEW")} END;
        CREATE TRIGGER keyword_edits_delete AFTER DELETE ON episodes BEGIN
            {_LOGGED.format(row="OLD")} END;
"""
# bm25()'s weight of each column, in the table's order (the scope column weighs nothing).
_COLUMN_WEIGHTS = {
    "search_text": TURN_WEIGHT,
    "context_text": CONTEXT_WEIGHT,
    "search_cjk": TURN_WEIGHT,
}
# A row's weighted count of a stem in fts5vocab's 'instance' rows, over the searched columns.
_CASES = " ".join(f"WHEN '{c}' THEN {w}" for c, w in _COLUMN_WEIGHTS.items())
_WEIGHT = f"sum(CASE col {_CASES} END)"
_SEARCHED = "col != 'fts_scope'"
_INSTANCES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.nexus_index_instances"
    " USING fts5vocab(main, episodes_fts, 'instance')"
)


@dataclass(frozen=True)
class IndexState:
    """What bm25() reads of the whole table, and where the index stood when it was read."""

    rows: int  # FTS5's row count
    tokens: int  # tokens in every column of every row
    edits: int  # `keyword_edits`
    last_id: int


def index_state(conn: sqlite3.Connection) -> IndexState:
    """FTS5's own totals (its averages record: a varint row count, then each column's
    token count), so that the average row length is the one bm25() divides by."""
    blob = conn.execute("SELECT block FROM episodes_fts_data WHERE id = 1").fetchone()
    values = _varints(blob[0]) if blob else [0]
    edits = conn.execute("SELECT edits FROM keyword_edits WHERE id = 1").fetchone()[0]
    last = conn.execute("SELECT max(id) FROM episodes").fetchone()[0]
    return IndexState(values[0], sum(values[1:]), int(edits), int(last or 0))


def row_sizes(conn: sqlite3.Connection, after_id: int) -> list[tuple[int, int]]:
    """(id, tokens in all its columns) of each indexed row past `after_id`: bm25()'s row
    length."""
    return _sizes_where(conn, "id > ?", after_id)


def sizes_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, int]:
    """`row_sizes` of these rows, those still indexed."""
    return dict(_sizes_where(conn, "id IN (SELECT value FROM json_each(?))", json.dumps(list(ids))))


def _sizes_where(conn: sqlite3.Connection, where: str, param: object) -> list[tuple[int, int]]:
    """(id, tokens in all its columns) of the indexed rows `where` keeps, by id."""
    select = f"SELECT id, hex(sz) AS size FROM episodes_fts_docsize WHERE {where} ORDER BY id"
    ids, sizes = _joined(conn, ("id", "size"), select, [param])
    found = zip(map(int, ids), sizes, strict=True)
    return sorted((row_id, sum(_varints(bytes.fromhex(size)))) for row_id, size in found)


def changed_ids(conn: sqlite3.Connection, since: int, until: int) -> list[int] | None:
    """The rows edited or deleted by edits `since` (excluded) to `until`, each once; None
    when the log no longer holds them all (`CHANGES_KEPT`)."""
    select = "SELECT episode_id FROM keyword_changes WHERE edit > ? AND edit <= ?"
    (ids,) = _joined(conn, ("episode_id",), select, [since, until])
    if len(ids) != until - since:  # one logged row an edit
        return None
    return sorted({int(episode_id) for episode_id in ids})


def stems(conn: sqlite3.Connection, terms: Sequence[str]) -> list[list[str]]:
    """The tokens FTS5 makes of each query term (porter-stemmed), as the index holds them."""
    for ddl in _COUNTING:
        conn.execute(ddl)
    conn.execute("DELETE FROM temp.nexus_query")
    conn.executemany(
        "INSERT INTO temp.nexus_query(rowid, term) VALUES (?, ?)", list(enumerate(terms, 1))
    )
    made: list[list[str]] = [[] for _ in terms]
    rows = conn.execute("SELECT doc, term FROM temp.nexus_query_stems ORDER BY doc, offset")
    for row, stem in rows.fetchall():
        made[row - 1].append(stem)
    conn.execute("DELETE FROM temp.nexus_query")
    return made


# A stem's postings: each row that holds it, with its weighted count of it, by row.
# Records in an array, not a list of tuples: the keyword copy keeps them (a forget's
# pending changes held 100,000 such lists), and the garbage collector walks every list
# with the GIL held, where it never walks an array.
POSTING = np.dtype([("row", np.int64), ("weight", np.float64)])
Postings = npt.NDArray[np.void]


def postings(conn: sqlite3.Connection, stem: str) -> Postings:
    """Each row that holds `stem` in a searched column, with its weighted count of it (what
    bm25() sums per phrase), by id."""
    conn.execute(_INSTANCES)
    docs, weights = _joined(
        conn,
        ("doc", "weight"),
        f"SELECT doc, {_WEIGHT} AS weight FROM temp.nexus_index_instances"
        f" WHERE term = ? AND {_SEARCHED} GROUP BY doc ORDER BY doc",
        [stem],
    )
    return _by_row(docs, weights)


def _by_row(docs: Sequence[str], weights: Sequence[str]) -> Postings:
    """Postings from their texts, sorted by row (see `_joined`)."""
    found = np.empty(len(docs), dtype=POSTING)
    found["row"] = np.fromiter(map(int, docs), dtype=np.int64, count=len(docs))
    found["weight"] = np.fromiter(map(float, weights), dtype=np.float64, count=len(docs))
    return found[np.argsort(found["row"], kind="stable")]


_NEW_ROWS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.nexus_new_rows USING fts5("
    f"search_text, context_text, search_cjk, fts_scope, tokenize='{TOKENIZER}')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.nexus_new_instances"
    " USING fts5vocab(temp, nexus_new_rows, 'instance')",
)


def new_postings(conn: sqlite3.Connection, after_id: int) -> dict[str, Postings]:
    """`postings` of every stem in the rows past `after_id`, tokenized by a table of the
    connection's own with the index's tokenizer (reading the index's entries of a common
    stem for a few new rows would read all of them)."""
    return _postings_where(conn, "id > ?", after_id)


def postings_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[str, Postings]:
    """`postings` of every stem in these rows (those still there), as `new_postings`."""
    return _postings_where(conn, "id IN (SELECT value FROM json_each(?))", json.dumps(list(ids)))


def _postings_where(conn: sqlite3.Connection, where: str, param: object) -> dict[str, Postings]:
    for ddl in _NEW_ROWS:
        conn.execute(ddl)
    conn.execute("DELETE FROM temp.nexus_new_rows")
    conn.execute(
        "INSERT INTO temp.nexus_new_rows(rowid, search_text, context_text, search_cjk, fts_scope)"
        f" SELECT id, search_text, context_text, search_cjk, fts_scope FROM episodes WHERE {where}",
        [param],
    )
    stems, docs, weights = _joined(
        conn,
        ("term", "doc", "weight"),
        f"SELECT term, doc, {_WEIGHT} AS weight FROM temp.nexus_new_instances"
        f" WHERE {_SEARCHED} GROUP BY term, doc ORDER BY term, doc",
        [],
    )
    conn.execute("DELETE FROM temp.nexus_new_rows")
    held: dict[str, list[int]] = {}  # each stem's places in the columns read
    for place, stem in enumerate(stems):
        held.setdefault(stem, []).append(place)
    return {
        stem: _by_row([docs[n] for n in places], [weights[n] for n in places])
        for stem, places in held.items()
    }


# What the keyword copy reads of the index comes back as one text (`group_concat`), not a
# row each: each row fetched takes the GIL back, and beside a busy thread each wait is up
# to a switch interval (5 ms). Read a row each, 50 rows' postings took 23 s beside a thread
# counting in Python, against 55 ms as one text, and a turn's keyword step reached 200 ms
# at p99 beside a forget. SQLite does not promise group_concat the subquery's order, so
# callers sort what they read (a sorted list is checked in one pass).
def _joined(
    conn: sqlite3.Connection, columns: Sequence[str], select: str, params: Sequence[object]
) -> list[list[str]]:
    """Each of `columns` (named by `select`) of its rows, as text, read as one text. Their
    values hold no space: numbers, hex, and tokens (unicode61 separates at every space)."""
    joined = " || ' ' || ".join(columns)
    row = conn.execute(f"SELECT group_concat({joined}, ' ') FROM ({select})", params).fetchone()
    parts = row[0].split(" ") if row[0] else []
    return [parts[n :: len(columns)] for n in range(len(columns))]


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints, as FTS5 writes its sizes and totals."""
    values, value, index = [], 0, 0
    while index < len(blob):
        byte = blob[index]
        index += 1
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    return values
