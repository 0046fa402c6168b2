"""One Config object, read from NEXUS_* environment variables.

A bad value fails loudly when the config is built, never silently defaults. Secrets are
kept out of repr() so that a logged or printed config never shows them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Final, TypeVar

from nexusai.errors import ConfigError


class RETRIEVAL:
    """Retrieval constants from the spec. RRF_K is not a setting."""

    RRF_K: Final = 60
    SEMANTIC_WEIGHT: Final = 1.0
    KEYWORD_WEIGHT: Final = 0.0


T = TypeVar("T")


@dataclass(frozen=True)
class Config:
    data_dir: Path = Path("./nexus-data")
    host: str = "127.0.0.1"
    port: int = 4000
    max_content_bytes: int = 1024 * 1024
    max_batch_size: int = 1000
    max_query_chars: int = 10_000
    embedder: str = "local"
    embedder_base_url: str | None = None
    embedder_model: str | None = None
    embedder_api_key: str | None = field(default=None, repr=False)
    embedder_dimension: int | None = None
    embedder_timeout: float = 10.0
    model_cache_dir: Path | None = None
    extractor: str = "spacy"
    database_url: str | None = field(default=None, repr=False)  # may hold a password
    qdrant_url: str | None = None
    qdrant_api_key: str | None = field(default=None, repr=False)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout: float = 60.0
    api_key: str | None = field(default=None, repr=False)
    max_body_bytes: int = 16 * 1024 * 1024  # a batch of long messages, JSON-escaped
    log_format: str = "text"
    memory_url: str | None = None
    memory_api_key: str | None = field(default=None, repr=False)
    memory_timeout: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir))

    @property
    def api_keys(self) -> list[str]:
        """NEXUS_API_KEY holds one key or several, comma-separated."""
        return [k.strip() for k in (self.api_key or "").split(",") if k.strip()]

    @property
    def db_path(self) -> Path:
        return self.data_dir / "nexus.db"

    @property
    def vectors_path(self) -> Path:
        return self.data_dir / "vectors"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Config:
        """Build a Config from NEXUS_* variables; keyword overrides win over the environment."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = env.get("NEXUS_" + f.name.upper())
            if raw is not None and raw.strip() != "":
                values[f.name] = _PARSERS.get(f.name, str)(raw.strip())
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)  # type: ignore[arg-type]
        config.validate()
        return config

    def validate(self) -> None:
        _check_range("NEXUS_PORT", self.port, 1, 65535)
        _check_range("NEXUS_MAX_CONTENT_BYTES", self.max_content_bytes, 1, 16 * 1024 * 1024)
        _check_range("NEXUS_MAX_BODY_BYTES", self.max_body_bytes, 1024, 1024 * 1024 * 1024)
        _check_range("NEXUS_MAX_BATCH_SIZE", self.max_batch_size, 1, 100_000)
        _check_range("NEXUS_MAX_QUERY_CHARS", self.max_query_chars, 1, 1_000_000)
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"NEXUS_LOG_FORMAT must be text or json, got {self.log_format!r}")
        if self.memory_timeout <= 0:
            raise ConfigError("NEXUS_MEMORY_TIMEOUT must be a positive number of seconds")
        if self.embedder_timeout <= 0:
            raise ConfigError("NEXUS_EMBEDDER_TIMEOUT must be a positive number of seconds")
        if self.database_url and not self.database_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError(
                "NEXUS_DATABASE_URL must be a postgresql://user:password@host:port/dbname URL"
                " (unset, the store is SQLite in NEXUS_DATA_DIR)"
            )
        if self.llm_timeout <= 0:
            raise ConfigError("NEXUS_LLM_TIMEOUT must be a positive number of seconds")


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")


def _number(kind: Callable[[str], T], name: str) -> Callable[[str], T]:
    def parse(raw: str) -> T:
        try:
            return kind(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from None

    return parse


_PARSERS: dict[str, Callable[[str], object]] = {
    "data_dir": Path,
    "model_cache_dir": Path,
    "port": _number(int, "NEXUS_PORT"),
    "max_content_bytes": _number(int, "NEXUS_MAX_CONTENT_BYTES"),
    "max_batch_size": _number(int, "NEXUS_MAX_BATCH_SIZE"),
    "max_body_bytes": _number(int, "NEXUS_MAX_BODY_BYTES"),
    "max_query_chars": _number(int, "NEXUS_MAX_QUERY_CHARS"),
    "llm_timeout": _number(float, "NEXUS_LLM_TIMEOUT"),
    "embedder_timeout": _number(float, "NEXUS_EMBEDDER_TIMEOUT"),
    "memory_timeout": _number(float, "NEXUS_MEMORY_TIMEOUT"),
    "embedder_dimension": _number(int, "NEXUS_EMBEDDER_DIMENSION"),
}
