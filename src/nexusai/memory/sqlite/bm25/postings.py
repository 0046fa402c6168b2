"""A stem's postings as the copy keeps them: ids, and their (row length, count) pairs
numbered once and grouped where many rows share one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from nexusai.memory.sqlite import fts

K1, B = 1.2, 0.75  # bm25()'s constants in FTS5


# A (row length, count) pair held by at least this many of a stem's postings is added in
# one call, with one weight: about a microsecond a call, against a nanosecond and a half a
# posting saved (measured: `_Postings`).
GROUPED = 1024


Ids = npt.NDArray[np.int64] | npt.NDArray[np.int32]


Floats = npt.NDArray[np.float64]


Counts = npt.NDArray[np.float32]  # weighted counts: multiples of a half, exact in float32


Codes = npt.NDArray[np.int32]  # a posting's (row length, count) pair, by its index in _Pairs


Indexes = npt.NDArray[np.intp]


Group = tuple[int, Indexes]  # a pair, and the ids of the postings that have it


class _Pairs:
    """Every (row length, weighted count) pair a kept posting has, each once. A word's
    weight in a row depends on the pair, the table's average length and the word's idf
    only, so a turn weighs the pairs (thousands) once and looks each posting's weight up,
    instead of weighing millions of postings one by one."""

    def __init__(self) -> None:
        self._index: dict[tuple[float, float], int] = {}
        # Replaced, never changed in place: a turn reads them outside the lock.
        self._arrays: tuple[Floats, Counts] = (np.zeros(0), np.zeros(0, dtype=np.float32))
        self._table: tuple[float, Floats] | None = None

    def numbered(self, read: _Read) -> _Postings:
        """A stem's postings as kept: each pair by its number here (under the copy's lock)."""
        codes = self._coded(read.pairs)
        groups = tuple((int(codes[pair]), ids) for pair, ids in read.groups)
        return _Postings(groups, read.ids, codes[read.pair_of])

    def _coded(self, found: npt.NDArray[np.complex128]) -> Codes:
        """Each pair's number, the pairs not seen before numbered next."""
        codes = np.empty(len(found), dtype=np.int32)
        added: list[tuple[float, float]] = []
        for n, pair in enumerate(found.tolist()):
            key = (pair.real, pair.imag)
            code = self._index.get(key)
            if code is None:
                code = self._index[key] = len(self._index)
                added.append(key)
            codes[n] = code
        if added:
            sizes, counts = self._arrays
            new = np.array(added, dtype=np.float64).reshape(-1, 2)
            more = new[:, 1].astype(np.float32)
            self._arrays = (np.concatenate([sizes, new[:, 0]]), np.concatenate([counts, more]))
        return codes

    @classmethod
    def of(cls, sizes: Floats, counts: npt.NDArray[np.generic]) -> _Pairs:
        """The pairs `arrays` gave, numbered as they were."""
        pairs = cls()
        pairs._arrays = (sizes, counts.astype(np.float32))
        keys = zip(sizes.tolist(), pairs._arrays[1].tolist(), strict=True)
        pairs._index = {key: n for n, key in enumerate(keys)}
        return pairs

    def arrays(self) -> tuple[Floats, Counts]:
        """Each pair's row length and weighted count, by number."""
        return self._arrays

    def table(self, average: float) -> Floats:
        """Each pair's weight before idf: (f * (k1 + 1)) / (f + k1 * (...)), as bm25()
        computes it. Kept while the average length stays what it is."""
        sizes, counts = self._arrays
        kept = self._table
        if kept is not None and kept[0] == average and len(kept[1]) == len(sizes):
            return kept[1]
        table = _weighed(sizes.copy(), counts, 1.0, average)  # * 1.0 leaves a double as it is
        self._table = (average, table)
        return table


@dataclass(frozen=True)
class _Postings:
    """A stem's kept postings. Those whose (row length, count) pair many of them share are
    grouped by pair, ids only, and each group is added with one weight; the others keep
    each one's pair. At 1,000,000 rows of common words, whose every posting falls in one of
    17 pairs, that halved the scoring (measured with `_best`: 9.7 ms a turn against 4.5),
    in the same 8 bytes a posting."""

    groups: tuple[Group, ...]
    ids: Ids  # the others, by id
    codes: Codes  # and their pairs

    def __len__(self) -> int:
        return len(self.ids) + sum(len(ids) for _, ids in self.groups)

    def parts(self) -> list[Ids]:
        """Every id, in a few arrays."""
        return [ids for _, ids in self.groups] + [self.ids]

    def without(self, rows: npt.NDArray[np.int64]) -> _Postings:
        """Without these rows (sorted ids)."""
        groups = ((pair, ids[~_among(ids, rows)]) for pair, ids in self.groups)
        kept = ~_among(self.ids, rows)
        return _Postings(
            tuple((pair, ids) for pair, ids in groups if len(ids)),
            self.ids[kept],
            self.codes[kept],
        )

    def extended(self, more: _Postings) -> _Postings:
        """With `more`'s postings, none of which these hold (a row's postings are added in
        any order: each row holds a stem once, so the sum a row gets is the same)."""
        groups = dict(self.groups)
        for pair, ids in more.groups:
            groups[pair] = np.concatenate([groups[pair], ids]) if pair in groups else ids
        return _Postings(
            tuple(groups.items()),
            np.concatenate([self.ids, more.ids]),
            np.concatenate([self.codes, more.codes]),
        )


@dataclass(frozen=True)
class _Read:
    """A stem's postings as read from the index, before `_Pairs` numbers their pairs."""

    pairs: npt.NDArray[np.complex128]  # (row length, count) pairs, each once
    groups: tuple[Group, ...]  # by index in `pairs`
    ids: Ids
    pair_of: Indexes  # each of `ids`' index in `pairs`


def _postings(read: fts.Postings, sizes: Floats, last_id: int, grouped: int) -> _Read:
    """A stem's postings as read from the index, those of pairs held `grouped` times or
    more put in groups. Worked out before the lock is taken (a common word's take tens of
    milliseconds at 1,000,000 rows); `_Pairs.numbered` then numbers the pairs under it."""
    ids = cast(Ids, read["row"].astype(_id_kind(last_id)))
    counts = read["weight"].astype(np.float32)
    pairs, inverse = np.unique(np.take(sizes, ids) + 1j * counts, return_inverse=True)
    pair_of = inverse.ravel()
    held = np.bincount(pair_of, minlength=len(pairs))
    shared = held >= grouped
    if not shared.any():
        return _Read(pairs, (), ids, pair_of)
    by_pair = np.argsort(pair_of, kind="stable")  # stable: each group's ids stay in order
    ends = np.cumsum(held)
    groups = tuple(
        (int(pair), ids[by_pair[ends[pair] - held[pair] : ends[pair]]].astype(np.intp))
        for pair in np.flatnonzero(shared)
    )
    alone = ~shared[pair_of]
    return _Read(pairs, groups, ids[alone], pair_of[alone])


def _weighed(length: Floats, counts: Counts, idf: float, average: float) -> Floats:
    """idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * length / average)) for each row, as
    bm25() computes it: the same operations in the same order (a sum or product with its
    operands swapped is the same double), in place, since at 1,000,000 rows a common word's
    temporaries cost more than its arithmetic. `length` is the caller's to spend."""
    length *= B
    length /= average
    length += 1 - B
    length *= K1
    weighed = counts.astype(np.float64)
    length += weighed
    weighed *= K1 + 1.0
    weighed /= length
    weighed *= idf
    return weighed


def _id_kind(last_id: int) -> type[np.signedinteger]:
    """Ids held in 32 bits while every id up to `last_id` fits."""
    return np.int32 if last_id <= np.iinfo(np.int32).max else np.int64


def _sizes(sizes: Sequence[tuple[int, int]], last_id: int) -> Floats:
    lengths = np.zeros(last_id + 1)
    ids = np.fromiter((row for row, _ in sizes), dtype=_id_kind(last_id), count=len(sizes))
    lengths[ids] = np.fromiter((size for _, size in sizes), dtype=np.float32, count=len(sizes))
    return lengths


def _among(ids: Ids, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which of `ids` are among `rows` (sorted; a forget's chunk is a few dozen)."""
    if not len(rows):
        return np.zeros(len(ids), dtype=np.bool_)
    at = np.minimum(np.searchsorted(rows, ids), len(rows) - 1)
    found: npt.NDArray[np.bool_] = rows[at] == ids
    return found
