"""The copy saved beside the store at a stop and read back at a start, and read from a
snapshot of the index."""

from __future__ import annotations

import json
import logging
import sqlite3
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import astuple
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt

from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.bm25.changes import _Copy
from nexusai.memory.sqlite.bm25.postings import Group, Ids, _Pairs, _Postings

log = logging.getLogger("nexusai.memory.sqlite.bm25")


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: the index's totals, its rows and its postings all at one
    state, whatever commits meanwhile."""
    if conn.in_transaction:  # inside a caller's transaction: it is the snapshot
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


# The copy on disk: numpy arrays in one uncompressed .npz, written whole under a temporary
# name and renamed, so a crash leaves the last one whole. Its index state says which index
# it belongs to: one edited since is read anew (`_reopened`).
def _save(copy: _Copy, path: Path) -> None:
    """Writes `copy` to `path` (a failure is logged: the next start reads the index)."""
    stems = list(copy.postings)  # oldest use first, kept so
    kept = [copy.postings[stem] for stem in stems]
    groups = [(n, pair, ids) for n, p in enumerate(kept) for pair, ids in p.groups]
    sizes, counts = copy.pairs.arrays()
    arrays: dict[str, npt.NDArray[np.generic]] = {
        "state": np.array(astuple(copy.state), dtype=np.int64),
        "sizes": copy.sizes,
        "pair_sizes": sizes,
        "pair_counts": counts,
        "stems": np.frombuffer(json.dumps(stems).encode(), dtype=np.uint8),
        "ids": _joined([p.ids.astype(np.int64) for p in kept]),
        "codes": _joined([p.codes for p in kept], np.int32),
        "ends": np.cumsum([len(p.ids) for p in kept], dtype=np.int64),
        "group_of": np.array([n for n, _, _ in groups], dtype=np.int64),
        "group_pair": np.array([pair for _, pair, _ in groups], dtype=np.int64),
        "group_ids": _joined([ids.astype(np.int64) for _, _, ids in groups]),
        "group_ends": np.cumsum([len(ids) for _, _, ids in groups], dtype=np.int64),
    }
    part = path.with_name(path.name + ".part")
    try:
        with open(part, "wb") as out:
            np.savez(out, allow_pickle=False, **arrays)
        part.replace(path)
    except OSError as exc:
        log.warning("could not keep the keyword copy for the next start: %s", exc)
        with suppress(OSError):
            part.unlink()


def _load(path: Path) -> _Copy | None:
    """The copy `_save` wrote, or None (none, or not whole: the index is read instead)."""
    try:
        with open(path, "rb") as file, np.load(file, allow_pickle=False) as saved:
            arrays = {name: saved[name] for name in saved.files}
        return _copy_of(arrays)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.warning("the saved keyword copy is unreadable (%s): reading the index", exc)
        return None


def _copy_of(arrays: dict[str, npt.NDArray[np.generic]]) -> _Copy:
    state = fts.IndexState(*(int(value) for value in arrays["state"]))
    if len(arrays["sizes"]) != state.last_id + 1:
        raise ValueError("its row lengths do not match its state")
    kind = np.int32 if state.last_id <= np.iinfo(np.int32).max else np.int64
    stems: list[str] = json.loads(arrays["stems"].tobytes().decode())
    ends, group_ends = arrays["ends"], arrays["group_ends"]
    if len(ends) != len(stems) or (len(ends) and ends[-1] != len(arrays["ids"])):
        raise ValueError("its postings do not match its words")
    groups: list[list[Group]] = [[] for _ in stems]
    starts = np.concatenate([[0], group_ends]).astype(np.int64)[:-1]
    for n, pair, start, end in zip(
        arrays["group_of"], arrays["group_pair"], starts, group_ends, strict=True
    ):
        groups[int(n)].append((int(pair), arrays["group_ids"][start:end].astype(np.intp)))
    pairs = _Pairs.of(arrays["pair_sizes"].astype(np.float64), arrays["pair_counts"])
    copy = _Copy(state, arrays["sizes"].astype(np.float64), pairs)
    start = 0
    for n, stem in enumerate(stems):
        end = int(ends[n])
        ids = cast(Ids, arrays["ids"][start:end].astype(kind))
        codes = arrays["codes"][start:end].astype(np.int32)
        copy.postings[stem] = _Postings(tuple(groups[n]), ids, codes)
        copy.entries += len(copy.postings[stem])
        start = end
    return copy


def _joined(
    parts: Sequence[npt.NDArray[np.generic]], kind: type = np.int64
) -> npt.NDArray[np.generic]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=kind)
