"""The eval's vectors, kept between runs: a labelled set is imported afresh every run, and
embedding its messages is most of a run's time (BEAM's 500K tier: 27,224 messages of
about 2,100 characters). A text's vector is made once per embedder and read back after,
so a second run of a set costs what its questions cost. The same vectors either way: a
cached one is the vector that run made."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from nexusai.config import Config
from nexusai.embedders import Embedder, Vector, create_embedder
from nexusai.embedders.minilm import default_cache_dir

_Maker = Callable[[list[str]], list[Vector]]


def eval_embedder(config: Config, kept: bool = True) -> Embedder:
    """The configured embedder, its vectors kept between runs unless not `kept`."""
    embedder = create_embedder(config)
    return KeptVectors(embedder, default_folder(config.model_cache_dir)) if kept else embedder


def default_folder(cache_dir: Path | None) -> Path:
    """Beside the models' cache (`NEXUS_MODEL_CACHE_DIR`, else `~/.cache/nexusai`)."""
    return (cache_dir or default_cache_dir()) / "eval-vectors"


class KeptVectors(Embedder):
    """`inner`'s vectors, each text's made once and kept in a SQLite file per embedder."""

    def __init__(self, inner: Embedder, folder: Path) -> None:
        self.inner = inner
        self.name, self.dimension = inner.name, inner.dimension
        self.batch_size, self.window_chars = inner.batch_size, inner.window_chars
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", inner.name)
        self._db = sqlite3.connect(folder / f"{safe}.sqlite", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, v BLOB)")
        self._lock = threading.Lock()

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self.embed(texts)

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return self._kept([("passage", t) for t in texts], self.inner.embed)

    def embed_query(self, text: str) -> Vector:
        return self._kept([("query", text)], lambda ts: [self.inner.embed_query(ts[0])])[0]

    def _kept(self, asked: list[tuple[str, str]], make: _Maker) -> list[Vector]:
        keys = [_key(kind, text) for kind, text in asked]
        found = self._read(keys)
        missing = [i for i, key in enumerate(keys) if key not in found]
        if missing:
            made = make([asked[i][1] for i in missing])
            rows = [(keys[i], _blob(v)) for i, v in zip(missing, made, strict=True)]
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            found.update(rows)
        return [np.frombuffer(found[key], dtype=np.float64).tolist() for key in keys]

    def _read(self, keys: list[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT key, v FROM vectors WHERE key IN ({marks})"
                out.update(self._db.execute(sql, chunk).fetchall())
        return out

    def close(self) -> None:
        self._db.close()


def _blob(vector: Vector) -> bytes:
    return np.asarray(vector, dtype=np.float64).tobytes()  # a Python float, to the bit


def _key(kind: str, text: str) -> bytes:
    return hashlib.blake2b(f"{kind}\0{text}".encode(), digest_size=20).digest()
