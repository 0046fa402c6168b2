"""bm25() in numpy, operation by operation as FTS5's `fts5Bm25Function`, so that every
score is the same double, and the best rows kept."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from nexusai.memory.sqlite.bm25.changes import _Copy
from nexusai.memory.sqlite.bm25.postings import Floats, Ids, _Postings


class _Scratch:
    """The arrays a search fills, lent and taken back: at 1,000,000 rows a fresh array of
    scores and a common word's weights are tens of megabytes of new pages, whose first
    writes took half of a search's time (measured: 20.3 / 29.5 ms against 11.7 / 14.5).
    As many sets as searches run at once, each the size of the largest asked."""

    def __init__(self) -> None:
        self._free: list[tuple[Floats, Floats]] = []
        self._lock = threading.Lock()

    @contextmanager
    def lent(self, rows: int, longest: int) -> Iterator[tuple[Floats, Floats]]:
        """Zeroed scores for `rows` rows, and room for `longest` weights."""
        with self._lock:
            scores, weights = self._free.pop() if self._free else (np.empty(0), np.empty(0))
        if len(scores) < rows:
            scores = np.empty(rows)
        if len(weights) < longest:
            weights = np.empty(longest)
        scores[:rows].fill(0.0)
        try:
            yield scores[:rows], weights
        finally:
            with self._lock:
                self._free.append((scores, weights))


def _best(
    copy: _Copy,
    asked: Sequence[_Postings],
    limit: int,
    scratch: _Scratch,
    only: Ids | None = None,
) -> list[tuple[int, float]]:
    rows = float(copy.state.rows)
    average = float(copy.state.tokens) / rows if rows else 0.0
    table = copy.pairs.table(average)
    longest = max((len(postings) for postings in asked), default=0)
    with scratch.lent(len(copy.sizes), longest) as (scores, room):
        for postings in asked:  # the query's order, as bm25() adds its phrases
            held = len(postings)
            if not held:
                continue
            idf = math.log((rows - held + 0.5) / (held + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            # Each row once a stem, in the query's order: grouped or not, its sum is
            # bm25()'s, added in bm25()'s order.
            for pair, ids in postings.groups:
                np.add.at(scores, ids, table[pair] * idf)
            weights = np.take(table, postings.codes, out=room[: len(postings.ids)])
            weights *= idf
            # take and add.at, not fancy indexing: with 32-bit ids numpy converts the
            # index array on every use, which made a common word's scoring twice as slow.
            np.add.at(scores, postings.ids, weights)
        if only is None:
            return _ranked(scores, _contenders(scores, asked, limit, room), limit)
        within = only[only < len(scores)]
        return _ranked(scores, within[scores[within] > 0.0], limit)  # a found row scores > 0


def _ranked(scores: Floats, ids: Ids, limit: int) -> list[tuple[int, float]]:
    """The best `limit` of the rows `ids`, best first, ties by id."""
    best = scores[ids]
    if len(ids) > limit > 0:
        cut = np.partition(-best, limit - 1)[limit - 1]
        kept = -best <= cut  # every row tied with the last kept, for the order by id
        ids, best = ids[kept], best[kept]
    order = np.lexsort((ids, -best))[:limit]
    return [(int(i), float(s)) for i, s in zip(ids[order], best[order], strict=True)]


def _contenders(scores: Floats, asked: Sequence[_Postings], limit: int, room: Floats) -> Ids:
    """Every row that could be among the best `limit`, by id: those scoring at least the
    `limit`-th best of the rows of one word (no more than the true cut, so none is lost),
    the word with the fewest rows, which is quick to rank; every row found (a found row
    scores above 0) when no word has `limit` rows. `room` holds that word's scores."""
    rarest = min((p for p in asked if len(p) >= limit > 0), key=len, default=None)
    if rarest is None:
        return np.flatnonzero(scores)
    found, start = room[: len(rarest)], 0
    for ids in rarest.parts():
        np.take(scores, ids, out=found[start : start + len(ids)])
        start += len(ids)
    found.partition(len(rarest) - limit)
    return np.flatnonzero(scores >= found[len(rarest) - limit])
