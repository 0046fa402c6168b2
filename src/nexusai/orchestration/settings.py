"""Runtime settings: validated, persisted in a small SQLite file, read fresh on every request.

Every setting is declared once, in `SETTINGS`, with its range and default; the HTTP models,
validation messages and the CLI all read that table.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nexusai.config import RETRIEVAL
from nexusai.errors import InvalidInput
from nexusai.orchestration.modes import MODES

Value = float | str
# The most memories a budgeted turn may give (the `memoryLimit` setting's top and default):
# as many as the deepest pool a budget ranks, so that by default the budget decides.
MAX_MEMORIES = RETRIEVAL.POOL_DEPTH_MAX


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type[int] | type[float] | type[str]
    low: float  # a number's range; a choice has `choices` instead
    high: float
    default: Value
    description: str
    choices: tuple[str, ...] = ()

    @property
    def allowed(self) -> str:
        """The values it takes, in words."""
        if self.choices:
            return " or ".join(repr(c).replace("'", '"') for c in self.choices)
        return f"{self.low:g} to {self.high:g}"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "semanticWeight",
        float,
        0,
        5,
        RETRIEVAL.SEMANTIC_WEIGHT,
        "Weight of the Qdrant semantic ranking in the fusion; 0 turns it off",
    ),
    Setting(
        "keywordWeight",
        float,
        0,
        5,
        RETRIEVAL.KEYWORD_WEIGHT,
        "Weight of the FTS5 keyword ranking in the fusion; 0 turns it off",
    ),
    Setting(
        "semanticLimit",
        int,
        1,
        100,
        10,
        "How many fused memories a turn gets (the keyword leg asks for twice as many)",
    ),
    Setting(
        "recentLimit",
        int,
        0,
        100,
        10,
        "How many of the session's latest episodes the prompt holds as recent turns",
    ),
    Setting("entityLimit", int, 0, 50, 10, "How many known entities a turn gets"),
    Setting(
        "keywordBudget",
        int,
        0,
        10_000_000,
        0,
        "Most index entries the keyword leg may read: past it the message's commonest words"
        " are left out of its query, the rarest always kept (0: every word, the spec's query)",
    ),
    Setting(
        "contextBudget",
        int,
        0,
        32_000,
        0,
        "Most tokens a turn's memories may cost in the prompt, as its layout gives them: above"
        " 0 they are chosen from a deeper list (50 deep up to 1,000 tokens, 100 up to 2,000,"
        " 200 above) for the most evidence per token (long ones cut to the passage that"
        " matters), by the ranker's probability at fusion learned and by a chance fitted to"
        " each place at rrf; what a budget gives, a larger one gives too (0: the first"
        " semanticLimit memories whole, the spec's turn)",
    ),
    Setting(
        "memoryLimit",
        int,
        1,
        MAX_MEMORIES,
        MAX_MEMORIES,
        "With a contextBudget: most memories a turn gives, however many more would fit"
        " (semanticLimit is the count without a budget; with one, the budget decides up to"
        " this)",
    ),
    Setting(
        "standingLimit",
        int,
        0,
        20,
        10,
        "How many of the rules and lasting preferences the user stated (recognised when"
        " stored) a turn carries under `standing`; when the scope holds no more than this,"
        " all of them come (a profile), else those at or above standingFloor, nearest the"
        " message first, then the instructions and health and diet ones however far, and"
        " a warning counts the rest. Pinned episodes come always. With a contextBudget they"
        " come first, within a quarter of it (0: none of the recognised ones)",
    ),
    Setting(
        "standingFloor",
        float,
        0,
        1,
        0.35,
        "When the scope holds more recognised rules and preferences than standingLimit: how"
        " near the message in meaning (cosine) one must be to come first; instructions,"
        " health and diet come after those whatever their nearness, pinned episodes"
        " always. The default is fitted, by conversation, for the default"
        " embedder (docs/evaluation.md); 0: no floor",
    ),
    Setting(
        "memoryOrder",
        str,
        0,
        0,
        "rank",
        "The order a turn's memories are given in: best first (rank), by when they were"
        " said (time; every group of memories is dated), or by the message (auto: time"
        " when it asks in what order things happened, else rank)",
        choices=("auto", "rank", "time"),
    ),
    Setting(
        "timeAware",
        str,
        0,
        0,
        "off",
        'A time the message names ("last week", "in March", "yesterday"), read'
        " relative to the turn's time: with filter, only episodes said then are searched",
        choices=("off", "filter"),
    ),
    Setting(
        "fusion",
        str,
        0,
        0,
        next(iter(MODES)),  # the spec's RRF
        "How the two legs become one list: the spec's weighted RRF, or the learned ranker"
        " (both legs asked deeper, every candidate scored; the weights then do nothing)",
        choices=tuple(MODES),
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}


def field_name(name: str) -> str:
    """A setting's Python name: `semanticWeight` -> `semantic_weight`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class RuntimeSettings:
    """One field per setting of `SETTINGS`, in snake_case (a test checks they match); the
    values come from that table, never defaulted here."""

    semantic_weight: float
    keyword_weight: float
    semantic_limit: int
    recent_limit: int
    entity_limit: int
    keyword_budget: int
    context_budget: int
    memory_limit: int
    standing_limit: int
    standing_floor: float
    memory_order: str
    time_aware: str
    fusion: str

    @classmethod
    def from_values(cls, values: Mapping[str, Value]) -> RuntimeSettings:
        typed: dict[str, Any] = {field_name(s.name): s.kind(values[s.name]) for s in SETTINGS}
        return cls(**typed)

    def with_changes(self, changes: Mapping[str, object]) -> RuntimeSettings:
        """These settings with `changes` applied, each validated like a PATCH (one bad value
        is an InvalidInput naming it); nothing is saved."""
        checked = {name: validate(name, value) for name, value in changes.items()}
        return RuntimeSettings.from_values({**self.to_values(), **checked})

    def to_values(self) -> dict[str, Value]:
        return {s.name: getattr(self, field_name(s.name)) for s in SETTINGS}


DEFAULTS = RuntimeSettings.from_values({s.name: s.default for s in SETTINGS})


def validate(name: str, value: object) -> Value:
    """The value as the setting's type, or InvalidInput naming the field and its range."""
    setting = BY_NAME.get(name)
    if setting is None:
        known = ", ".join(BY_NAME)
        raise InvalidInput(f"{name!r} is not a setting; the settings are {known}")
    if setting.choices:
        if value not in setting.choices:
            raise InvalidInput(f"{name} must be {setting.allowed}, got {value!r}")
        return str(value)
    range_text = setting.allowed
    # The rule of every body: a whole number is written as one (5, not 5.0), as an id is.
    wanted = int if setting.kind is int else int | float
    wrong_type = isinstance(value, bool) or not isinstance(value, wanted)
    if wrong_type:
        kind = "a whole number" if setting.kind is int else "a number"
        raise InvalidInput(f"{name} must be {kind} from {range_text}, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    if not setting.low <= number <= setting.high:
        raise InvalidInput(f"{name} must be from {range_text}, got {value!r}")
    return setting.kind(number)


def from_stored(stored: Mapping[str, str]) -> RuntimeSettings:
    """Settings as stored (name -> JSON text) over the defaults; unknown names are ignored."""
    values = DEFAULTS.to_values()
    for name, raw in stored.items():
        if name in BY_NAME:
            values[name] = json.loads(raw)
    return RuntimeSettings.from_values(values)


class SettingsStore:
    """Orchestration's own small SQLite file of settings (name -> JSON text). In one process
    with the memory service it shares the store's file; alone it keeps a file of its own, so
    orchestration never opens the episode store."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30.0)
        self._lock = threading.Lock()
        with self._lock, self._conn:
            self._conn.execute(_TABLE)

    def get(self) -> RuntimeSettings:
        with self._lock:
            return from_stored(dict(self._conn.execute("SELECT key, value FROM settings")))

    def update(self, changes: Mapping[str, object]) -> RuntimeSettings:
        """Validates every change first: one bad value and nothing is written."""
        checked = {name: json.dumps(validate(name, value)) for name, value in changes.items()}
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                list(checked.items()),
            )
        return self.get()

    def close(self) -> None:
        self._conn.close()


_TABLE = "CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def read_settings_file(path: Path) -> RuntimeSettings:
    """The settings a file holds, read without opening it for writing (the service may be
    running); the defaults when there is no file or no settings in it yet."""
    if not path.exists():
        return DEFAULTS
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return from_stored(dict(conn.execute("SELECT key, value FROM settings")))
    except sqlite3.OperationalError:  # a file from before settings existed
        return DEFAULTS
    finally:
        conn.close()
