"""Runtime settings: validated, persisted in SQLite, read fresh on every request.

Every setting is declared once, in `SETTINGS`, with its range and default; the HTTP models,
validation messages and the CLI all read that table.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from nexusai.config import RETRIEVAL
from nexusai.errors import InvalidInput


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type[int] | type[float]
    low: float
    high: float
    default: float
    description: str


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
)
BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class RuntimeSettings:
    semantic_weight: float
    keyword_weight: float
    semantic_limit: int
    recent_limit: int
    entity_limit: int

    @classmethod
    def from_values(cls, values: Mapping[str, float]) -> RuntimeSettings:
        return cls(
            semantic_weight=float(values["semanticWeight"]),
            keyword_weight=float(values["keywordWeight"]),
            semantic_limit=int(values["semanticLimit"]),
            recent_limit=int(values["recentLimit"]),
            entity_limit=int(values["entityLimit"]),
        )

    def to_values(self) -> dict[str, float]:
        return {
            "semanticWeight": self.semantic_weight,
            "keywordWeight": self.keyword_weight,
            "semanticLimit": self.semantic_limit,
            "recentLimit": self.recent_limit,
            "entityLimit": self.entity_limit,
        }


DEFAULTS = RuntimeSettings.from_values({s.name: s.default for s in SETTINGS})


class KeyValueStore(Protocol):
    def read_settings(self) -> dict[str, str]: ...

    def write_settings(self, values: Mapping[str, str]) -> None: ...


def validate(name: str, value: object) -> float:
    """The value as the setting's type, or InvalidInput naming the field and its range."""
    setting = BY_NAME.get(name)
    if setting is None:
        known = ", ".join(BY_NAME)
        raise InvalidInput(f"{name!r} is not a setting; the settings are {known}")
    range_text = f"{setting.low:g} to {setting.high:g}"
    wrong_type = isinstance(value, bool) or not isinstance(value, int | float)
    if not wrong_type and setting.kind is int and not float(value).is_integer():  # type: ignore[arg-type]
        wrong_type = True
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
    def __init__(self, backend: KeyValueStore) -> None:
        self._backend = backend
        self._lock = threading.Lock()

    def get(self) -> RuntimeSettings:
        return from_stored(self._backend.read_settings())

    def update(self, changes: Mapping[str, object]) -> RuntimeSettings:
        """Validates every change first: one bad value and nothing is written."""
        checked = {name: validate(name, value) for name, value in changes.items()}
        with self._lock:
            self._backend.write_settings({k: json.dumps(v) for k, v in checked.items()})
            return self.get()
