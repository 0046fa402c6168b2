"""Named schema migrations, applied in order on open and recorded in `_migrations`.

A migration is never edited once it has shipped: add a new one instead.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from nexusai import keywords
from nexusai.memory.sqlite import fts
from nexusai.memory.standing import changed, classified
from nexusai.memory.texts import compose_context_text, compose_search_text
from nexusai.models import now_text

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE projects (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        );
        CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            project_id INTEGER REFERENCES projects(id) ON DELETE CASCADE,
            title TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX sessions_project ON sessions(project_id);
        CREATE TABLE episodes (
            id INTEGER PRIMARY KEY,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            speaker TEXT NOT NULL,
            content TEXT NOT NULL,
            occurred_at TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX episodes_session_time ON episodes(session_id, occurred_at, id);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
    )
    run_script(conn, fts.INDEX_DDL_V1)


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run statements one by one: executescript() would COMMIT the caller's transaction."""
    for statement in _statements(script):
        conn.execute(statement)


@migration
def m002_vector_state(conn: sqlite3.Connection) -> None:
    """Each episode records whether its vector is in the index; 'pending' ones are retried."""
    conn.execute(
        "ALTER TABLE episodes ADD COLUMN vector_state TEXT NOT NULL DEFAULT 'pending'"
        " CHECK (vector_state IN ('pending', 'indexed'))"
    )
    conn.execute(
        "CREATE INDEX episodes_vector_pending ON episodes(id) WHERE vector_state = 'pending'"
    )


@migration
def m003_search_text(conn: sqlite3.Connection) -> None:
    """Index and embed each episode as `speaker: text [image: caption]` (search_text), with
    the turn before it (context_text: a reply such as "Yes, last Tuesday!" means little
    alone). FTS moves to these two columns."""
    conn.execute("ALTER TABLE episodes ADD COLUMN search_text TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE episodes ADD COLUMN context_text TEXT NOT NULL DEFAULT ''")
    conn.execute("UPDATE episodes SET search_text = content")
    fts.drop_index(conn)
    run_script(conn, fts.INDEX_DDL_V1)
    fts.rebuild_index(conn)
    conn.execute("UPDATE episodes SET vector_state = 'pending'")


@migration
def m004_import_keys(conn: sqlite3.Connection) -> None:
    """What an import wrote, by its key in the source, so a re-import skips it."""
    run_script(
        conn,
        """
        CREATE TABLE import_sessions (
            key TEXT PRIMARY KEY,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE
        );
        CREATE TABLE import_episodes (
            key TEXT PRIMARY KEY,
            episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE
        );
        CREATE INDEX import_sessions_session ON import_sessions(session_id);
        CREATE INDEX import_episodes_episode ON import_episodes(episode_id);
        """,
    )


@migration
def m005_entities(conn: sqlite3.Connection) -> None:
    """Entities and the episodes that mention them. An entity belongs to a scope (a project,
    or a session without one), so projects never share one. Triggers keep mention counts and
    dates right however mentions go (a deleted episode cascades), and drop an entity whose
    last mention is gone."""
    run_script(
        conn,
        """
        CREATE TABLE entities (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            name TEXT NOT NULL,
            normalized TEXT NOT NULL,
            type TEXT NOT NULL,
            first_seen TEXT NOT NULL,
            last_seen TEXT NOT NULL,
            mention_count INTEGER NOT NULL DEFAULT 0,
            summary TEXT,
            vector_state TEXT NOT NULL DEFAULT 'pending',
            UNIQUE (scope, normalized, type)
        );
        CREATE TABLE entity_mentions (
            entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
            PRIMARY KEY (entity_id, episode_id)
        );
        CREATE INDEX entity_mentions_episode ON entity_mentions(episode_id);
        CREATE TRIGGER entity_mention_added AFTER INSERT ON entity_mentions BEGIN
            UPDATE entities SET mention_count = mention_count + 1,
                first_seen = min(first_seen,
                    (SELECT occurred_at FROM episodes WHERE id = new.episode_id)),
                last_seen = max(last_seen,
                    (SELECT occurred_at FROM episodes WHERE id = new.episode_id)),
                -- a new vector only when a new session can now see it (its payload)
                vector_state = CASE WHEN EXISTS (
                    SELECT 1 FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id
                    WHERE m.entity_id = new.entity_id AND m.episode_id != new.episode_id
                    AND e.session_id = (SELECT session_id FROM episodes WHERE id = new.episode_id)
                ) THEN vector_state ELSE 'pending' END
            WHERE id = new.entity_id;
        END;
        CREATE TRIGGER entity_mention_removed AFTER DELETE ON entity_mentions BEGIN
            UPDATE entities SET mention_count = mention_count - 1,
                first_seen = coalesce((SELECT min(e.occurred_at) FROM entity_mentions m
                    JOIN episodes e ON e.id = m.episode_id WHERE m.entity_id = old.entity_id),
                    first_seen),
                last_seen = coalesce((SELECT max(e.occurred_at) FROM entity_mentions m
                    JOIN episodes e ON e.id = m.episode_id WHERE m.entity_id = old.entity_id),
                    last_seen)
            WHERE id = old.entity_id;
            DELETE FROM entities WHERE id = old.entity_id AND mention_count <= 0;
        END;
        ALTER TABLE episodes ADD COLUMN entity_state TEXT NOT NULL DEFAULT 'pending';
        CREATE INDEX episodes_entity_pending ON episodes(id) WHERE entity_state = 'pending';
        """,
    )


@migration
def m006_context_tail(conn: sqlite3.Connection) -> None:
    """Each episode is indexed with the end of the turn before it (`CONTEXT_CHARS`), no
    longer all of it, and embedded episode first: every vector is rebuilt (in the
    background; the old ones serve until then)."""
    rows = conn.execute(
        "SELECT id, context_text, lag(speaker) OVER turns, lag(content) OVER turns"
        " FROM episodes WINDOW turns AS (PARTITION BY session_id ORDER BY occurred_at, id)"
    ).fetchall()
    for episode_id, current, speaker, content in rows:
        context = "" if speaker is None else compose_context_text(speaker, content)
        if context != current:
            conn.execute("UPDATE episodes SET context_text = ? WHERE id = ?", (context, episode_id))
    conn.execute("UPDATE episodes SET vector_state = 'pending'")


@migration
def m007_ids_never_reused(conn: sqlite3.Connection) -> None:
    """Ids of projects, sessions, episodes and entities are never handed out again after a
    delete (AUTOINCREMENT), so a client holding an old id cannot reach someone else's rows;
    the state columns accept only their states. SQLite adds neither to a table in place:
    each table is rebuilt, rows and ids kept. Runs with foreign keys off (see SqliteStore)."""
    _rebuild(
        conn,
        "projects",
        """CREATE TABLE projects (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        )""",
        [],
    )
    _rebuild(
        conn,
        "sessions",
        """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project_id INTEGER REFERENCES projects(id) ON DELETE CASCADE,
            title TEXT,
            created_at TEXT NOT NULL
        )""",
        ["CREATE INDEX sessions_project ON sessions(project_id)"],
    )
    _rebuild(
        conn,
        "episodes",
        """CREATE TABLE episodes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            speaker TEXT NOT NULL,
            content TEXT NOT NULL,
            occurred_at TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            vector_state TEXT NOT NULL DEFAULT 'pending'
                CHECK (vector_state IN ('pending', 'indexed')),
            search_text TEXT NOT NULL DEFAULT '',
            context_text TEXT NOT NULL DEFAULT '',
            entity_state TEXT NOT NULL DEFAULT 'pending'
                CHECK (entity_state IN ('pending', 'done'))
        )""",
        [
            "CREATE INDEX episodes_session_time ON episodes(session_id, occurred_at, id)",
            "CREATE INDEX episodes_vector_pending ON episodes(id) WHERE vector_state = 'pending'",
            "CREATE INDEX episodes_entity_pending ON episodes(id) WHERE entity_state = 'pending'",
            *_statements(fts.TRIGGERS_DDL_V1),
        ],
    )
    _rebuild(
        conn,
        "entities",
        """CREATE TABLE entities (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope TEXT NOT NULL,
            name TEXT NOT NULL,
            normalized TEXT NOT NULL,
            type TEXT NOT NULL,
            first_seen TEXT NOT NULL,
            last_seen TEXT NOT NULL,
            mention_count INTEGER NOT NULL DEFAULT 0,
            summary TEXT,
            vector_state TEXT NOT NULL DEFAULT 'pending'
                CHECK (vector_state IN ('pending', 'indexed')),
            UNIQUE (scope, normalized, type)
        )""",
        [],
    )


@migration
def m008_image_caption(conn: sqlite3.Connection) -> None:
    """An image's caption is indexed with the turn, so it gets a column of its own: in
    metadata a user's PATCH could erase it by accident. What was there moves."""
    conn.execute("ALTER TABLE episodes ADD COLUMN image_caption TEXT")
    conn.execute(
        "UPDATE episodes SET image_caption = json_extract(metadata, '$.imageCaption'),"
        " metadata = json_remove(metadata, '$.imageCaption')"
        " WHERE json_type(metadata, '$.imageCaption') = 'text'"
    )


@migration
def m009_one_entity_per_name(conn: sqlite3.Connection) -> None:
    """One entity per name in a scope, whatever types the recognizer gave its mentions
    ("Caroline" was a person and a place): each mention keeps the type it was given, and the
    entity takes the type most of its mentions give it. Entities that split a name merge
    into the most mentioned one."""
    run_script(
        conn,
        """
        ALTER TABLE entity_mentions ADD COLUMN type TEXT;
        UPDATE entity_mentions
            SET type = (SELECT type FROM entities WHERE id = entity_mentions.entity_id);
        CREATE TEMP TABLE keep_entities AS
            SELECT e.id, e.scope, e.normalized FROM entities e WHERE e.id = (
                SELECT x.id FROM entities x WHERE x.scope = e.scope
                AND x.normalized = e.normalized ORDER BY x.mention_count DESC, x.id LIMIT 1);
        INSERT OR IGNORE INTO entity_mentions (entity_id, episode_id, type)
            SELECT k.id, m.episode_id, m.type FROM entity_mentions m
            JOIN entities e ON e.id = m.entity_id
            JOIN keep_entities k ON k.scope = e.scope AND k.normalized = e.normalized
            WHERE e.id != k.id;
        DELETE FROM entity_mentions WHERE entity_id NOT IN (SELECT id FROM keep_entities);
        DROP TABLE keep_entities;
        """,
    )
    conn.execute(
        "UPDATE entities SET vector_state = 'pending', type = coalesce(("
        " SELECT m.type FROM entity_mentions m WHERE m.entity_id = entities.id"
        " AND m.type IS NOT NULL GROUP BY m.type ORDER BY count(*) DESC, min(m.rowid)"
        " LIMIT 1), type)"
    )


@migration
def m010_fts_cjk_and_scope(conn: sqlite3.Connection) -> None:
    """Keyword search gains two columns: the CJK bigrams of each turn (Chinese and Japanese
    words are found inside a clause) and the turn's session as a token, so a search scoped
    to a few sessions is one MATCH. The FTS table is made anew from the episodes."""
    conn.execute("ALTER TABLE episodes ADD COLUMN search_cjk TEXT NOT NULL DEFAULT ''")
    conn.execute(
        "ALTER TABLE episodes ADD COLUMN fts_scope TEXT"
        " GENERATED ALWAYS AS ('s' || session_id) VIRTUAL"
    )
    rows = conn.execute("SELECT id, search_text FROM episodes").fetchall()
    for episode_id, text in rows:
        if cjk := keywords.cjk_text(text):
            conn.execute("UPDATE episodes SET search_cjk = ? WHERE id = ?", (cjk, episode_id))
    fts.drop_index(conn)
    run_script(conn, fts.INDEX_DDL)
    fts.rebuild_index(conn)


@migration
def m011_one_vector_per_episode(conn: sqlite3.Connection) -> None:
    """Episodes are embedded by their opening window alone, and a role ("user",
    "assistant") is no longer written before what was said: every indexed text and vector
    is made again (the old vectors serve until then)."""
    rows = conn.execute(
        "SELECT id, speaker, content, image_caption, lag(speaker) OVER turns,"
        " lag(content) OVER turns FROM episodes"
        " WINDOW turns AS (PARTITION BY session_id ORDER BY occurred_at, id)"
    ).fetchall()
    for episode_id, speaker, content, caption, before, before_text in rows:
        search = compose_search_text(speaker, content, caption)
        context = "" if before is None else compose_context_text(before, before_text)
        conn.execute(
            "UPDATE episodes SET search_text = ?, context_text = ?, search_cjk = ? WHERE id = ?",
            (search, context, keywords.cjk_text(search), episode_id),
        )
    conn.execute("UPDATE episodes SET vector_state = 'pending'")


@migration
def m012_api_keys(conn: sqlite3.Connection) -> None:
    """Project API keys, stored as a keyed hash (memory/keys.py); a key goes with its
    project."""
    conn.execute(
        """
        CREATE TABLE api_keys (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT,
            project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
            read_only INTEGER NOT NULL CHECK (read_only IN (0, 1)),
            hash TEXT NOT NULL,
            created_at TEXT NOT NULL,
            revoked_at TEXT
        )
        """
    )
    conn.execute("CREATE INDEX api_keys_project ON api_keys(project_id)")


@migration
def m013_keyword_edits(conn: sqlite3.Connection) -> None:
    """A count of edits and deletes of indexed rows, so that the whole-table BM25 kept in
    memory (memory/sqlite/bm25.py) knows when it is out of step with FTS5."""
    run_script(conn, fts.EDITS_DDL)


@migration
def m014_standing_and_pins(conn: sqlite3.Connection) -> None:
    """Standing messages (a rule the user set, a lasting preference) and pinned episodes:
    both are candidates a turn may carry whatever its search found. The stored episodes
    are classified once, here."""
    run_script(conn, STANDING_DDL)
    rows = conn.execute("SELECT id, speaker, content FROM episodes").fetchall()
    conn.executemany("UPDATE episodes SET standing = ? WHERE id = ?", classified(rows))


@migration
def m015_expiry(conn: sqlite3.Connection) -> None:
    """An episode may expire: past `expires_at` no read returns it, and the upkeep deletes
    it."""
    run_script(conn, EXPIRY_DDL)


@migration
def m016_retention(conn: sqlite3.Connection) -> None:
    """A project may keep its episodes for a number of days: each episode's deadline is the
    sooner of its own expiry (`expiry_asked`) and its time plus those days. Searches by a
    time window over a whole store read an index on the time."""
    run_script(conn, RETENTION_DDL)


@migration
def m017_labels(conn: sqlite3.Connection) -> None:
    """Each top-level metadata value that a filter can match (text, number, true, false),
    as text, in an index kept by triggers: a metadata filter reads the index, not every
    episode's JSON."""
    run_script(conn, LABELS_DDL)
    conn.execute(
        "INSERT INTO episode_labels (key, value, episode_id)"
        f" SELECT key, {LABEL_TEXT}, episodes.id FROM episodes, json_each(episodes.metadata)"
        f" WHERE {LABEL_KINDS}"
    )


@migration
def m018_standing_order(conn: sqlite3.Connection) -> None:
    """The standing episodes' index holds `pinned` too, in the order a turn reads them:
    a turn over 1,000 sessions read each of their 11,649 rows to sort by it (20 ms a turn at
    1,000,000 episodes), and now reads only the index (0.3 ms)."""
    run_script(conn, STANDING_ORDER_DDL)


@migration
def m019_standing_widened(conn: sqlite3.Connection) -> None:
    """The standing patterns read more ways of setting a rule ("Don't use emojis", "Call
    me Sam from now on", "I'd rather you ..."): the episodes not marked are read again."""
    unmarked = "SELECT id, speaker, content FROM episodes WHERE standing IS NULL"
    rows = conn.execute(unmarked).fetchall()
    conn.executemany("UPDATE episodes SET standing = ? WHERE id = ?", classified(rows))


STANDING_ORDER_DDL = """
DROP INDEX episodes_standing;
CREATE INDEX episodes_standing ON episodes(session_id, pinned, occurred_at)
    WHERE standing IS NOT NULL OR pinned;
"""


# A value as filters compare it: JSON's text for numbers and booleans (json_each gives true
# as 1, its type tells them apart); nulls, objects and arrays never match.
LABEL_TEXT = (
    "CASE type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(value AS TEXT) END"
)
LABEL_KINDS = "type IN ('text', 'integer', 'real', 'true', 'false')"
LABELS_DDL = f"""
CREATE TABLE episode_labels (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    PRIMARY KEY (key, value, episode_id)
) WITHOUT ROWID;
CREATE INDEX episode_labels_episode ON episode_labels(episode_id);
CREATE TRIGGER episode_labels_made AFTER INSERT ON episodes BEGIN
    INSERT INTO episode_labels (key, value, episode_id)
    SELECT key, {LABEL_TEXT}, new.id FROM json_each(new.metadata) WHERE {LABEL_KINDS};
END;
CREATE TRIGGER episode_labels_changed AFTER UPDATE OF metadata ON episodes BEGIN
    DELETE FROM episode_labels WHERE episode_id = old.id;
    INSERT INTO episode_labels (key, value, episode_id)
    SELECT key, {LABEL_TEXT}, new.id FROM json_each(new.metadata) WHERE {LABEL_KINDS};
END;
"""


RETENTION_DDL = """
ALTER TABLE projects ADD COLUMN retention_days INTEGER;
ALTER TABLE episodes ADD COLUMN expiry_asked TEXT;
UPDATE episodes SET expiry_asked = expires_at WHERE expires_at IS NOT NULL;
CREATE INDEX episodes_time ON episodes(occurred_at, expires_at);
"""


EXPIRY_DDL = """
ALTER TABLE episodes ADD COLUMN expires_at TEXT;
CREATE INDEX episodes_expiry ON episodes(expires_at) WHERE expires_at IS NOT NULL;
"""


STANDING_DDL = """
ALTER TABLE episodes ADD COLUMN standing TEXT CHECK (standing IN ('instruction', 'preference'));
ALTER TABLE episodes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
CREATE INDEX episodes_standing ON episodes(session_id, occurred_at)
    WHERE standing IS NOT NULL OR pinned;
"""


def _rebuild(conn: sqlite3.Connection, table: str, create: str, after: list[str]) -> None:
    """SQLite's way to change a table's definition: a new table, the rows copied with their
    ids, the old one dropped, the new one renamed; then its indexes and triggers again.
    Triggers of other tables that name this one are kept as they are (legacy rename)."""
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    names = ", ".join(columns)
    conn.execute(create.replace(f"CREATE TABLE {table} (", f"CREATE TABLE {table}_new (", 1))
    conn.execute(f"INSERT INTO {table}_new ({names}) SELECT {names} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute("PRAGMA legacy_alter_table = ON")
    try:
        conn.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    finally:
        conn.execute("PRAGMA legacy_alter_table = OFF")
    for statement in after:
        conn.execute(statement)


def _statements(script: str) -> list[str]:
    statements, statement = [], ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            statements.append(statement)
            statement = ""
    return statements


def apply_migrations(
    conn: sqlite3.Connection, migrations: Sequence[Migration] | None = None
) -> list[str]:
    """Apply every migration not yet recorded (of `migrations`, all by default); returns the
    names applied. Caller holds a write transaction, so a failed migration leaves the
    database as it was."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    applied = []
    for step in MIGRATIONS if migrations is None else migrations:
        if step.__name__ in done:
            continue
        step(conn)
        conn.execute(
            "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (step.__name__, now_text())
        )
        applied.append(step.__name__)
    return applied


@migration
def m020_keyword_changes(conn: sqlite3.Connection) -> None:
    """Which row each edit or delete of an indexed row touched: the whole-table BM25 copy
    applies a forget's deletes in place instead of reading the whole index again."""
    run_script(conn, fts.CHANGES_DDL)


@migration
def m021_extraction_notes(conn: sqlite3.Connection) -> None:
    """What entity extraction left unread of a message (too long, out of time, failed on
    it alone): the message is done, and not read again at every start."""
    run_script(
        conn,
        """
        CREATE TABLE extraction_notes (
            episode_id INTEGER PRIMARY KEY REFERENCES episodes(id) ON DELETE CASCADE,
            outcome TEXT NOT NULL,
            detail TEXT NOT NULL
        );
        """,
    )


@migration
def m022_standing_the_users_own(conn: sqlite3.Connection) -> None:
    """Only the user's own rules are standing (an assistant's or a third person's are
    memories), and the patterns read "Call me Sam", "Please keep your answers short" and
    "I'm diabetic": every episode is read again, and those whose mark changes rewritten."""
    rows = conn.execute("SELECT id, speaker, content, standing FROM episodes").fetchall()
    conn.executemany("UPDATE episodes SET standing = ? WHERE id = ?", changed(rows))


# A JSON number's value, for filters that compare numbers as numbers (1 matches 1.0).
LABEL_NUMBER = "CASE type WHEN 'integer' THEN CAST(value AS REAL) WHEN 'real' THEN value END"
LABEL_NUMBERS_DDL = f"""
ALTER TABLE episode_labels ADD COLUMN number REAL;
CREATE INDEX episode_labels_number ON episode_labels(key, number) WHERE number IS NOT NULL;
DROP TRIGGER episode_labels_made;
DROP TRIGGER episode_labels_changed;
CREATE TRIGGER episode_labels_made AFTER INSERT ON episodes BEGIN
    INSERT INTO episode_labels (key, value, episode_id, number)
    SELECT key, {LABEL_TEXT}, new.id, {LABEL_NUMBER} FROM json_each(new.metadata)
    WHERE {LABEL_KINDS};
END;
CREATE TRIGGER episode_labels_changed AFTER UPDATE OF metadata ON episodes BEGIN
    DELETE FROM episode_labels WHERE episode_id = old.id;
    INSERT INTO episode_labels (key, value, episode_id, number)
    SELECT key, {LABEL_TEXT}, new.id, {LABEL_NUMBER} FROM json_each(new.metadata)
    WHERE {LABEL_KINDS};
END;
"""


@migration
def m023_label_numbers(conn: sqlite3.Connection) -> None:
    """Each metadata label that is a JSON number keeps its value as a number too, so that
    a filter compares numbers as numbers: 1 matches 1.0, and 1e20 matches 100000000000000000000
    (as text, SQLite renders them "1.0" and "1.0e+20")."""
    run_script(conn, LABEL_NUMBERS_DDL)
    conn.execute(
        "UPDATE episode_labels SET number = (SELECT CASE type WHEN 'integer'"
        " THEN CAST(j.value AS REAL) WHEN 'real' THEN j.value END"
        " FROM episodes e, json_each(e.metadata) j"
        " WHERE e.id = episode_labels.episode_id AND j.key = episode_labels.key)"
    )
