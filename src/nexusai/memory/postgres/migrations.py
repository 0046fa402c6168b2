"""The PostgreSQL store's schema (issue #18): named migrations, recorded as they are
applied, the counterpart of `migrations` for SQLite.

Several memory replicas may start against one database at the same moment; each calls
`apply_migrations`, and a transaction-scoped advisory lock makes the first one apply what
is missing while the others wait, then find nothing left to do. A migration and its record
commit together, or neither does.

The schema holds what SQLite's does after its m012: projects, sessions, episodes (with
their vector and entity states and the texts the indexes see), the keyword index
(`postgres.fts`), entities and their mentions (counts and first/last seen kept by triggers, as in
SQLite), import bookkeeping, settings, meta and project keys. Times are `timestamptz`;
ids are identities, never reused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg import Connection

from nexusai.memory.postgres import fts as pg_fts
from nexusai.memory.standing import changed, classified

LOCK = "hashtext('nexus_migrations')"

M001_INITIAL = """
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE projects (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);
CREATE TABLE sessions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id bigint REFERENCES projects(id) ON DELETE CASCADE,
    title text,
    created_at timestamptz NOT NULL
);
CREATE INDEX sessions_project ON sessions (project_id);
CREATE TABLE episodes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id bigint NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    speaker text NOT NULL,
    content text NOT NULL,
    occurred_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
    image_caption text,
    vector_state text NOT NULL DEFAULT 'pending' CHECK (vector_state IN ('pending', 'indexed')),
    entity_state text NOT NULL DEFAULT 'pending' CHECK (entity_state IN ('pending', 'done')),
    search_text text NOT NULL DEFAULT '',
    context_text text NOT NULL DEFAULT '',
    search_cjk text NOT NULL DEFAULT ''
);
CREATE INDEX episodes_session_time ON episodes (session_id, occurred_at, id);
CREATE INDEX episodes_vector_pending ON episodes (id) WHERE vector_state = 'pending';
CREATE INDEX episodes_entity_pending ON episodes (id) WHERE entity_state = 'pending';
-- Import keys are found by prefix as a range (key >= p AND key < p || U+10FFFF), which
-- holds only in code-point order, whatever the database's collation.
CREATE TABLE import_sessions (
    key text COLLATE "C" PRIMARY KEY,
    session_id bigint NOT NULL REFERENCES sessions(id) ON DELETE CASCADE
);
CREATE INDEX import_sessions_session ON import_sessions (session_id);
CREATE TABLE import_episodes (
    key text COLLATE "C" PRIMARY KEY,
    episode_id bigint NOT NULL REFERENCES episodes(id) ON DELETE CASCADE
);
CREATE INDEX import_episodes_episode ON import_episodes (episode_id);
CREATE TABLE api_keys (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text,
    project_id bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    read_only boolean NOT NULL,
    hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
"""

M002_KEYWORDS = f"""
{pg_fts.SETUP_DDL}
{pg_fts.TABLE_DDL}
ALTER TABLE {pg_fts.TABLE} ADD CONSTRAINT {pg_fts.TABLE}_episode
    FOREIGN KEY (id) REFERENCES episodes(id) ON DELETE CASCADE;
{pg_fts.UPSERT_FUNCTION_DDL}
{pg_fts.TRIGGER_DDL}
"""

# Entities as SQLite keeps them (m005, m009): one per name and type in a scope; a mention
# counts, widens first/last seen, and asks for a new vector only when a session that could
# not see the entity now can (its payload lists the sessions); the last mention gone, the
# entity goes too.
M003_ENTITIES = """
CREATE TABLE entities (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope text NOT NULL,
    name text NOT NULL,
    normalized text NOT NULL,
    type text NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    mention_count integer NOT NULL DEFAULT 0,
    summary text,
    vector_state text NOT NULL DEFAULT 'pending' CHECK (vector_state IN ('pending', 'indexed')),
    UNIQUE (scope, normalized, type)
);
CREATE TABLE entity_mentions (
    entity_id bigint NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    episode_id bigint NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    type text,
    PRIMARY KEY (entity_id, episode_id)
);
CREATE INDEX entity_mentions_episode ON entity_mentions (episode_id);

CREATE FUNCTION entity_mention_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    said RECORD;
BEGIN
    SELECT occurred_at, session_id INTO said FROM episodes WHERE id = NEW.episode_id;
    UPDATE entities SET
        mention_count = mention_count + 1,
        first_seen = least(first_seen, said.occurred_at),
        last_seen = greatest(last_seen, said.occurred_at),
        vector_state = CASE WHEN EXISTS (
            SELECT 1 FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id
            WHERE m.entity_id = NEW.entity_id AND m.episode_id <> NEW.episode_id
            AND e.session_id = said.session_id
        ) THEN vector_state ELSE 'pending' END
    WHERE id = NEW.entity_id;
    RETURN NULL;
END $$;
CREATE TRIGGER entity_mention_added AFTER INSERT ON entity_mentions
    FOR EACH ROW EXECUTE FUNCTION entity_mention_added();

CREATE FUNCTION entity_mention_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE entities SET
        mention_count = mention_count - 1,
        first_seen = coalesce((SELECT min(e.occurred_at) FROM entity_mentions m
            JOIN episodes e ON e.id = m.episode_id WHERE m.entity_id = OLD.entity_id),
            first_seen),
        last_seen = coalesce((SELECT max(e.occurred_at) FROM entity_mentions m
            JOIN episodes e ON e.id = m.episode_id WHERE m.entity_id = OLD.entity_id),
            last_seen)
    WHERE id = OLD.entity_id;
    DELETE FROM entities WHERE id = OLD.entity_id AND mention_count <= 0;
    RETURN NULL;
END $$;
CREATE TRIGGER entity_mention_removed AFTER DELETE ON entity_mentions
    FOR EACH ROW EXECUTE FUNCTION entity_mention_removed();
"""

M005_STANDING = """
ALTER TABLE episodes ADD COLUMN standing text CHECK (standing IN ('instruction', 'preference'));
ALTER TABLE episodes ADD COLUMN pinned boolean NOT NULL DEFAULT false;
CREATE INDEX episodes_standing ON episodes (session_id, occurred_at)
    WHERE standing IS NOT NULL OR pinned;
"""


def m005_standing(conn: Connection[tuple[object, ...]]) -> None:
    """Standing messages and pins (SQLite's m014): the stored episodes classified once."""
    conn.execute(M005_STANDING.encode())
    rows = conn.execute("SELECT id, speaker, content FROM episodes").fetchall()
    with conn.cursor() as cursor:
        cursor.executemany("UPDATE episodes SET standing = %s WHERE id = %s", classified(rows))


def m010_standing_widened(conn: Connection[tuple[object, ...]]) -> None:
    """SQLite's m019: the episodes not marked are read again by the widened patterns."""
    unmarked = "SELECT id, speaker, content FROM episodes WHERE standing IS NULL"
    rows = conn.execute(unmarked).fetchall()
    with conn.cursor() as cursor:
        cursor.executemany("UPDATE episodes SET standing = %s WHERE id = %s", classified(rows))


def m012_standing_the_users_own(conn: Connection[tuple[object, ...]]) -> None:
    """SQLite's m022: the user's own rules only, and the widened patterns, read again."""
    rows = conn.execute("SELECT id, speaker, content, standing FROM episodes").fetchall()
    with conn.cursor() as cursor:
        cursor.executemany("UPDATE episodes SET standing = %s WHERE id = %s", changed(rows))


M006_EXPIRY = """
ALTER TABLE episodes ADD COLUMN expires_at timestamptz;
CREATE INDEX episodes_expiry ON episodes (expires_at) WHERE expires_at IS NOT NULL;
"""

M007_RETENTION = """
ALTER TABLE projects ADD COLUMN retention_days integer;
ALTER TABLE episodes ADD COLUMN expiry_asked timestamptz;
UPDATE episodes SET expiry_asked = expires_at WHERE expires_at IS NOT NULL;
CREATE INDEX episodes_time ON episodes (occurred_at, expires_at);
"""

# Each top-level metadata value a filter can match, as `metadata ->> key` gives it, in an
# index kept by a trigger (SQLite's m017).
M008_LABELS = """
CREATE TABLE episode_labels (
    key text NOT NULL,
    value text NOT NULL,
    episode_id bigint NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    PRIMARY KEY (key, value, episode_id)
);
CREATE INDEX episode_labels_episode ON episode_labels (episode_id);
CREATE FUNCTION episode_labels_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.metadata IS NOT DISTINCT FROM OLD.metadata THEN
            RETURN NULL;
        END IF;
        DELETE FROM episode_labels WHERE episode_id = OLD.id;
    END IF;
    INSERT INTO episode_labels (key, value, episode_id)
    SELECT key, NEW.metadata ->> key, NEW.id FROM jsonb_each(NEW.metadata)
    WHERE jsonb_typeof(value) IN ('string', 'number', 'boolean');
    RETURN NULL;
END $$;
CREATE TRIGGER episode_labels_kept AFTER INSERT OR UPDATE OF metadata ON episodes
    FOR EACH ROW EXECUTE FUNCTION episode_labels_kept();
INSERT INTO episode_labels (key, value, episode_id)
SELECT key, metadata ->> key, id FROM episodes, jsonb_each(metadata)
WHERE jsonb_typeof(value) IN ('string', 'number', 'boolean');
"""


# The standing episodes in the order a turn reads them, from the index alone (SQLite's m018).
M009_STANDING_ORDER = """
DROP INDEX episodes_standing;
CREATE INDEX episodes_standing ON episodes (session_id, pinned, occurred_at)
    WHERE standing IS NOT NULL OR pinned;
"""

# What entity extraction left unread of a message (SQLite's m021).
M011_EXTRACTION_NOTES = """
CREATE TABLE extraction_notes (
    episode_id bigint PRIMARY KEY REFERENCES episodes(id) ON DELETE CASCADE,
    outcome text NOT NULL,
    detail text NOT NULL
);
"""

# Each label that is a JSON number keeps its value as a number too (SQLite's m023).
M013_LABEL_NUMBERS = """
ALTER TABLE episode_labels ADD COLUMN number double precision;
CREATE INDEX episode_labels_number ON episode_labels (key, number) WHERE number IS NOT NULL;
CREATE OR REPLACE FUNCTION episode_labels_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.metadata IS NOT DISTINCT FROM OLD.metadata THEN
            RETURN NULL;
        END IF;
        DELETE FROM episode_labels WHERE episode_id = OLD.id;
    END IF;
    INSERT INTO episode_labels (key, value, episode_id, number)
    SELECT key, NEW.metadata ->> key, NEW.id,
        CASE WHEN jsonb_typeof(value) = 'number' THEN (value #>> '{}')::double precision END
    FROM jsonb_each(NEW.metadata)
    WHERE jsonb_typeof(value) IN ('string', 'number', 'boolean');
    RETURN NULL;
END $$;
UPDATE episode_labels l SET number = (e.metadata -> l.key #>> '{}')::double precision
FROM episodes e
WHERE e.id = l.episode_id AND jsonb_typeof(e.metadata -> l.key) = 'number';
"""

Migration = str | Callable[[Connection[tuple[object, ...]]], None]

MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_initial", M001_INITIAL),
    ("m002_keywords", M002_KEYWORDS),
    ("m003_entities", M003_ENTITIES),
    ("m004_keyword_counts", pg_fts.STATS_DDL),  # counted from the rows there, then kept
    ("m005_standing", m005_standing),
    ("m006_expiry", M006_EXPIRY),
    ("m007_retention", M007_RETENTION),  # SQLite's m016
    ("m008_labels", M008_LABELS),  # SQLite's m017
    ("m009_standing_order", M009_STANDING_ORDER),  # SQLite's m018
    ("m010_standing_widened", m010_standing_widened),  # SQLite's m019
    ("m011_extraction_notes", M011_EXTRACTION_NOTES),  # SQLite's m021
    ("m012_standing_the_users_own", m012_standing_the_users_own),  # SQLite's m022
    ("m013_label_numbers", M013_LABEL_NUMBERS),  # SQLite's m023
]


def apply_migrations(
    conn: Connection[tuple[object, ...]],
    migrations: Sequence[tuple[str, Migration]] | None = None,
) -> list[str]:
    """Applies, in order and in one transaction, the migrations this database has not
    recorded (of `migrations`, all by default); returns their names (none when another
    replica got there first)."""
    with conn.transaction():
        conn.execute(f"SELECT pg_advisory_xact_lock({LOCK})")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations"
            " (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {str(row[0]) for row in conn.execute("SELECT name FROM _migrations")}
        applied = []
        for name, step in MIGRATIONS if migrations is None else migrations:
            if name not in done:
                if isinstance(step, str):
                    conn.execute(step.encode())  # several statements: no parameters
                else:
                    step(conn)
                conn.execute("INSERT INTO _migrations (name) VALUES (%s)", [name])
                applied.append(name)
    return applied
