"""One Config object, read from NEXUS_* environment variables.

A bad value fails loudly when the config is built, never silently defaults. Secrets are
kept out of repr() so that a logged or printed config never shows them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Final, TypeVar

from nexusai.errors import ConfigError


class RETRIEVAL:
    """Retrieval constants, none of them a setting: the spec's (RRF_K, the weights' defaults)
    and the depth fusion ranks to for a budget."""

    RRF_K: Final = 60
    # How deep fusion ranks for a budgeted turn (the pool packing chooses from) at least,
    # and so how deep the learned mode's ranker is trained: one number, here. A larger
    # budget ranks deeper, up to POOL_DEPTH_MAX (`orchestration.packing.stages`).
    POOL_DEPTH: Final = 50
    POOL_DEPTH_MAX: Final = 200
    SEMANTIC_WEIGHT: Final = 1.0
    KEYWORD_WEIGHT: Final = 0.0


T = TypeVar("T")

# How the embedded vector index keeps its vectors (NEXUS_VECTOR_MEMORY), the default first;
# `memory/vectors/edge_layout.py` says what each is.
VECTOR_LAYOUTS: Final = ("compact", "ram")


def setting(default: T, doc: str, *, secret: bool = False) -> T:
    """A Config field with the words its reference gives it (docs/configuration.md is
    generated from these); a secret is kept out of repr()."""
    return field(default=default, repr=not secret, metadata={"doc": doc})


@dataclass(frozen=True)
class Config:
    data_dir: Path = setting(Path("./nexus-data"), "where the SQLite file (and vectors) live")
    host: str = setting("127.0.0.1", "where `nexus serve` listens")
    port: int = setting(4000, "the port `nexus serve` listens on")
    max_content_bytes: int = setting(1024 * 1024, "largest episode content, in bytes")
    max_metadata_bytes: int = setting(
        64 * 1024, "largest episode metadata, in bytes of its JSON (413 over it)"
    )
    max_batch_size: int = setting(1000, "most episodes in one batch write")
    max_query_chars: int = setting(10_000, "longest search text or chat message")
    embedder: str = setting(
        "local",
        "`local` (all-MiniLM-L6-v2, shipped), `e5-int8` or `e5` (multilingual-e5-small,"
        " extra `e5`), `mpnet` (all-mpnet-base-v2, extra `mpnet`), `sentence-transformers`"
        " (MiniLM through torch, extra `reference`), or `openai` (any `/v1/embeddings`"
        " endpoint)",
    )
    embedder_base_url: str | None = setting(None, "for `openai`: the endpoint's base URL")
    embedder_model: str | None = setting(None, "for `openai`: the model's name")
    embedder_api_key: str | None = setting(None, "for `openai`: its key", secret=True)
    embedder_dimension: int | None = setting(
        None, "for `openai`: the vectors' size (probed when not given)"
    )
    embedder_timeout: float = setting(
        10.0,
        "for `openai`, seconds: a turn's query gets one attempt (the turn goes on with"
        " keyword memories if it fails); writes retry three times, then in the background",
    )
    model_cache_dir: Path | None = setting(
        None, "where the ONNX graphs are kept (default `~/.cache/nexusai`)"
    )
    ranker: Path | None = setting(
        None,
        "the learned ranker's model file (`fusion: learned`), from `nexus ranker train`;"
        " unset: the one nexusai ships. A missing or bad file stops `nexus serve` at start",
    )
    extractor: str = setting("spacy", "entity extraction: `spacy`, `llm` or `none`")
    database_url: str | None = setting(
        None,
        "`postgresql://user:password@host:port/dbname`: the store in PostgreSQL, vectors in"
        " pgvector (extra `postgresql`); several replicas may share it. Unset: SQLite in the"
        " data dir. Never printed with its password",
        secret=True,
    )
    qdrant_url: str | None = setting(
        None, "a Qdrant server or cluster instead of the embedded index (extra `qdrant`)"
    )
    qdrant_api_key: str | None = setting(None, "the Qdrant server's key", secret=True)
    vector_memory: str = setting(
        VECTOR_LAYOUTS[0],
        "the embedded index's vectors: `compact` (an int8 copy in memory, the full vectors"
        " read from disk to rescore the best: a service holding 1,000,000 episodes peaks at"
        " 1.9 GB) or `ram` (all in memory: 3.0 GB). A change converts the index behind the"
        " running service",
    )
    llm_base_url: str | None = setting(None, "the chat LLM: an OpenAI-compatible base URL")
    llm_model: str | None = setting(None, "the chat LLM's model")
    llm_api_key: str | None = setting(None, "the chat LLM's key", secret=True)
    llm_timeout: float = setting(60.0, "seconds to wait for the chat LLM")
    llm_context_tokens: int = setting(
        8192,
        "the chat LLM's context window, in tokens: a chat turn (`/chat`, `/v1`) gives its"
        " memories half of it at most; past that they are packed into that many tokens"
        " (long ones as their passage) and the turn says so. `POST /context` is not capped",
    )
    api_key: str | None = setting(
        None,
        "the admin key (or several, comma-separated): required on every endpoint but"
        " `/health`, `/ready`, the docs and the inspector's page; the CLI sends it too",
        secret=True,
    )
    max_body_bytes: int = setting(
        16 * 1024 * 1024, "largest request body (`POST /import` excepted)"
    )  # a batch of long messages, JSON-escaped
    log_format: str = setting("text", "`text`, or `json` for structured logs")
    warm_seconds: float = setting(
        60.0,
        "at start, how long `/ready` may answer 503 while the keyword index (its commonest"
        " words first) and the newest standing memories' vectors are read ahead, and the"
        " newest session's last 12 messages are asked as `/context` turns (storing"
        " nothing), so that the first turns are as fast as later ones; 0: ready at once,"
        " each read as turns ask for it",
    )
    memory_url: str | None = setting(None, "`--role orchestration`: where the memory service is")
    memory_api_key: str | None = setting(
        None, "`--role orchestration`: the memory service's key", secret=True
    )
    memory_timeout: float = setting(
        5.0, "`--role orchestration`: seconds to wait for the memory service"
    )

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
        _check_range("NEXUS_MAX_METADATA_BYTES", self.max_metadata_bytes, 2, 16 * 1024 * 1024)
        _check_range("NEXUS_MAX_BODY_BYTES", self.max_body_bytes, 1024, 1024 * 1024 * 1024)
        _check_range("NEXUS_MAX_BATCH_SIZE", self.max_batch_size, 1, 100_000)
        _check_range("NEXUS_MAX_QUERY_CHARS", self.max_query_chars, 1, 1_000_000)
        _check_range("NEXUS_LLM_CONTEXT_TOKENS", self.llm_context_tokens, 512, 10_000_000)
        if self.vector_memory not in VECTOR_LAYOUTS:
            raise ConfigError(
                f"NEXUS_VECTOR_MEMORY must be {' or '.join(VECTOR_LAYOUTS)},"
                f" got {self.vector_memory!r}"
            )
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"NEXUS_LOG_FORMAT must be text or json, got {self.log_format!r}")
        for name in ("memory_timeout", "embedder_timeout", "llm_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"NEXUS_{name.upper()} must be a positive number of seconds")
        if self.database_url and not self.database_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError(
                "NEXUS_DATABASE_URL must be a postgresql://user:password@host:port/dbname URL"
                " (unset, the store is SQLite in NEXUS_DATA_DIR)"
            )
        if not 0 <= self.warm_seconds <= 3600:
            raise ConfigError(
                f"NEXUS_WARM_SECONDS must be between 0 and 3600, got {self.warm_seconds}"
            )
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise ConfigError(
                f"NEXUS_DATA_DIR ({self.data_dir}) is a file; give a folder (made if missing)"
            )


def reference() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting: what docs/configuration.md lists."""
    rows = []
    for item in fields(Config):
        default = "" if item.default is None else str(item.default)
        rows.append((f"NEXUS_{item.name.upper()}", default, str(item.metadata["doc"])))
    return rows


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")


def _number(kind: Callable[[str], T], name: str) -> Callable[[str], T]:
    def parse(raw: str) -> T:
        try:
            value = kind(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from None
        # float() reads "nan" and "inf", which pass every comparison a range check makes
        # wrong (nan <= 0 is false): a time-out of nan failed every chat turn.
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {raw!r}")
        return value

    return parse


_PARSERS: dict[str, Callable[[str], object]] = {
    "data_dir": Path,
    "model_cache_dir": Path,
    "ranker": Path,
    "port": _number(int, "NEXUS_PORT"),
    "max_content_bytes": _number(int, "NEXUS_MAX_CONTENT_BYTES"),
    "max_metadata_bytes": _number(int, "NEXUS_MAX_METADATA_BYTES"),
    "max_batch_size": _number(int, "NEXUS_MAX_BATCH_SIZE"),
    "max_body_bytes": _number(int, "NEXUS_MAX_BODY_BYTES"),
    "max_query_chars": _number(int, "NEXUS_MAX_QUERY_CHARS"),
    "llm_timeout": _number(float, "NEXUS_LLM_TIMEOUT"),
    "llm_context_tokens": _number(int, "NEXUS_LLM_CONTEXT_TOKENS"),
    "embedder_timeout": _number(float, "NEXUS_EMBEDDER_TIMEOUT"),
    "memory_timeout": _number(float, "NEXUS_MEMORY_TIMEOUT"),
    "warm_seconds": _number(float, "NEXUS_WARM_SECONDS"),
    "embedder_dimension": _number(int, "NEXUS_EMBEDDER_DIMENSION"),
}
