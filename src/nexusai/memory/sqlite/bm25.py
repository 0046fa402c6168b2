"""The spec's keyword query over the whole table, scored in numpy: the same rows, in the
same order, with the same scores as FTS5's `ORDER BY rank`, at a fraction of its cost.

FTS5 ranks every row that holds any of a message's words before it keeps the best, at
about 2 µs a row: tens of milliseconds when a project holds every session and its words
are held by tens of thousands of rows. Here each word's rows and weighted counts are read
from the index once (`fts.postings`), kept, and extended as rows are added, so that a turn
is a few vector operations. bm25() is computed as FTS5's `fts5Bm25Function` computes it,
operation by operation in the same order, so that every score is the same double.

FTS5 stays the index and the source of every figure; this is a copy that answers only
when it is in step with it (rows added, edited and deleted are applied to it as the
index's log of changes names them) and the caller asks FTS5 otherwise.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt

from nexusai.memory.sqlite import fts

log = logging.getLogger(__name__)

K1, B = 1.2, 0.75  # bm25()'s constants in FTS5
# Kept postings, 8 bytes an entry: at most this many entries a row of the table, and never
# fewer than MIN_ENTRIES (48 MB). The stems asked longest ago go first and are read again
# when asked. It grows with the table because what turns ask does: 140 realistic questions
# keep 12.9 million entries at 1,000,000 rows, and a smaller cap would read them over and
# over while FTS5 answered.
ENTRIES_PER_ROW = 32
MIN_ENTRIES = 6_000_000
MAX_TERMS = 200_000  # query terms whose tokens are kept
# A (row length, count) pair held by at least this many of a stem's postings is added in
# one call, with one weight: about a microsecond a call, against a nanosecond and a half a
# posting saved (measured: `_Postings`).
GROUPED = 1024
# Below this many rows FTS5 ranks a whole-table query in about a millisecond, less than the
# copy's own bookkeeping (measured at 10,000: 1.3 ms against 1.7).
MIN_ROWS = 20_000
# A turn reads the postings of words the copy lacks itself, instead of asking FTS5, when
# they are held by this many rows or fewer in all: about 1.6 µs a row to read (measured at
# 100,000 episodes), where FTS5 would rank every row of the turn's commoner words.
INLINE_ROWS = 4_000
# What reading an index entry costs against FTS5 ranking one: 1.8 µs against 1.3 (measured
# at 100,000 episodes: `fts.postings` of the commonest stems, and a first ask of common
# words answered by FTS5).
READ_COST = 1.4
# The warm-up reads stems in batches of about this many entries (under a second), between
# checks of its deadline.
WARM_ENTRIES = 400_000

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


@dataclass(frozen=True)
class _Lacking:
    """The stems a turn asked for (`asked`) of which the copy lacks some (`stems`)."""

    stems: list[str]
    asked: list[str]


@dataclass(frozen=True)
class _Change:
    """Rows edited or deleted at one step of the index: a stem's postings drop them and
    take their new ones (`fresh`, as read then), the next time the stem is used."""

    rows: npt.NDArray[np.int64]  # sorted
    fresh: dict[str, fts.Postings]
    grouped: int


def _applied(stem: str, postings: _Postings, changes: Sequence[_Change], copy: _Copy) -> _Postings:
    """The stem's postings with every change it is owed: the rows any of them touched
    dropped in one pass over the postings, not one a change (a common stem owed dozens of
    a forget's chunks took a turn tens of milliseconds), then each such row's postings as
    the last change that read it found them (a stem is owed at least one)."""
    latest: dict[int, float] = {}
    for change in changes:
        for row in change.rows.tolist():
            latest.pop(row, None)
        if (fresh := change.fresh.get(stem)) is not None:
            latest.update(fresh.tolist())
    touched = np.unique(np.concatenate([change.rows for change in changes]))
    kept = postings.without(touched)
    if latest:
        found = np.array(sorted(latest.items()), dtype=fts.POSTING)
        read = _postings(found, copy.sizes, copy.state.last_id, changes[0].grouped)
        kept = kept.extended(copy.pairs.numbered(read))
    return kept


# Changes kept for the stems not used since: past this many, those stems are dropped from
# the copy (read again when asked, FTS5 answering meanwhile) and the changes all of them
# had are let go. A forget of 10,000 is 200 chunks' changes: at 64, the turns beside it
# that asked a dropped stem waited 108-149 ms for FTS5, and their p99 rose 89-131 ms;
# at 512, 45-50 ms, and the server grew as much over the forget (176-186 MB, against
# 147-208 MB at 64).
PENDING_CHANGES = 512


@dataclass
class _Copy:
    """The index as bm25() sees it at one state: each row's length by id, and the postings
    of the stems asked so far. Edits and deletes reach a stem's postings when it is next
    used (`changes`): a forget's chunk costs a turn the few stems it asks, not all."""

    state: fts.IndexState
    sizes: Floats
    pairs: _Pairs = field(default_factory=_Pairs)  # shared by the copies grown from this one
    postings: dict[str, _Postings] = field(default_factory=dict)  # oldest use first
    entries: int = 0
    changes: list[_Change] = field(default_factory=list)  # not yet applied to every stem
    first: int = 0  # the number of `changes[0]`
    behind: dict[str, int] = field(default_factory=dict)  # a stem's first change not applied

    def used(self, stems: Sequence[str]) -> list[_Postings]:
        """The stems' postings, up to date, moved to the end of the order: the last to be
        dropped."""
        found = []
        for stem in stems:
            found.append(self._brought_up(stem))
            self.postings[stem] = self.postings.pop(stem)
        return found

    def _brought_up(self, stem: str) -> _Postings:
        postings = self.postings[stem]
        start = self.behind.pop(stem, None)
        if start is None:
            return postings
        postings = _applied(stem, postings, self.changes[start - self.first :], self)
        self.entries += len(postings) - len(self.postings[stem])
        self.postings[stem] = postings
        return postings

    def changed(self, change: _Change) -> None:
        """`change` is owed to every stem; the stems owed many are dropped."""
        number = self.first + len(self.changes)
        for stem in self.postings:
            self.behind.setdefault(stem, number)
        self.changes.append(change)
        if len(self.changes) > PENDING_CHANGES:
            cut = self.first + len(self.changes) - PENDING_CHANGES // 2
            for stem in [s for s, start in self.behind.items() if start < cut]:
                self.entries -= len(self.postings.pop(stem))
                del self.behind[stem]
        owed = min(self.behind.values(), default=self.first + len(self.changes))
        self.changes = self.changes[owed - self.first :]
        self.first = owed

    def settled(self) -> _Copy:
        """Every change applied to every stem (what is saved)."""
        for stem in list(self.behind):
            self._brought_up(stem)
        self.changes, self.first = [], self.first + len(self.changes)
        return self

    def keep(self, read: dict[str, _Read], cap: int) -> None:
        """Adds postings just read, dropping the stems used longest ago past `cap` entries."""
        for stem, postings in read.items():
            if stem in self.postings:  # read again by a turn that came meanwhile
                self.entries -= len(self.postings.pop(stem))
                self.behind.pop(stem, None)
            self.postings[stem] = self.pairs.numbered(postings)
            self.entries += len(self.postings[stem])
        while self.entries > cap and len(self.postings) > len(read):
            oldest = next(iter(self.postings))
            self.entries -= len(self.postings.pop(oldest))
            self.behind.pop(oldest, None)


class WholeTableBM25:
    """One per store. `search` answers from the copy when it can, and None when the caller
    must ask FTS5: while the copy is built or a word's postings are read (both behind the
    turn, in a thread), or when a word is more than one token."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        min_rows: int = MIN_ROWS,
        max_entries: int | None = None,
        grouped: int = GROUPED,
        inline_rows: int = INLINE_ROWS,
        saved: Path | None = None,
    ) -> None:
        """`max_entries`: the kept postings' cap; by default it grows with the table.
        `grouped`: how many of a stem's postings share a pair before they are grouped.
        `inline_rows`: a turn reads the stems it lacks itself when they hold this many
        rows or fewer in all. `saved`: where the copy is kept between starts (written at
        `close`, read by `warm`): reading it back is seconds where reading the index is
        minutes at 1,000,000 rows."""
        self._connect = connect
        self._min_rows = min_rows
        self._max_entries = max_entries
        self._grouped = grouped
        self._inline_rows = inline_rows
        self._saved = saved
        self._lock = threading.Lock()
        self._copy: _Copy | None = None
        self._worker: threading.Thread | None = None
        self._worker_conn: sqlite3.Connection | None = None
        self._closed = False
        self._wanted: set[str] = set()
        self._stem_of: dict[str, str | None] = {}
        self._scratch = _Scratch()
        self._rows: dict[str, int] = {}  # rows holding each stem, as the warm-up counted

    def search(
        self, terms: Sequence[str], limit: int, only: Ids | None = None
    ) -> list[tuple[int, float]] | None:
        """(id, score) of the best `limit` rows for the OR of `terms`, best first, ties by
        id, as `fts.search` with no scope finds them; with `only`, the best of those rows
        (a filter's, as `fts.search` joined to it finds them: scores are the whole
        table's either way). None when FTS5 must answer."""
        kept = self._kept(terms)
        if kept is None:
            return None
        copy, _, postings = kept
        return _best(copy, postings, limit, self._scratch, only)

    def warm(self, keep_on: Callable[[], bool]) -> None:
        """Reads the copy ahead of the turns, in the caller's thread: each row's length,
        then the postings of the commonest stems first (those FTS5 is slowest to rank),
        until the cap, or until `keep_on()` is false. Turns meanwhile are answered as
        ever; what they lack is read before the rest."""
        if self._claim():
            self._run(lambda: self._warm(keep_on))

    def held(self, terms: Sequence[str]) -> dict[str, int] | None:
        """How many rows hold each term in a searched column, from the kept postings (what
        `fts.term_counts` counts in the index, for a `keywordBudget`, without reading a
        common word's entries: 80 ms a turn at 1,000,000 episodes of common words). None
        when the copy does not hold every term's, or a term is one FTS5 counts in the
        scope column too."""
        kept = self._kept(terms)
        if kept is None or any(fts.is_scope_token(stem) for stem in kept[1]):
            return None
        return {term: len(found) for term, found in zip(terms, kept[2], strict=True)}

    def _kept(self, terms: Sequence[str]) -> tuple[_Copy, list[str], list[_Postings]] | None:
        """The copy, each term's stem and its postings, marked used; None when the copy
        cannot answer. Stems it lacks are read here when that costs less than FTS5
        answering the turn (`_worth_reading`), else behind this turn, which FTS5 answers."""
        found = self._lookup(terms)
        if not isinstance(found, _Lacking):
            return found
        if not self._worth_reading(found):
            with self._lock:
                self._wanted.update(found.stems)
                self._start(self._read_wanted)
            return None
        self._read_postings(found.stems)
        again = self._lookup(terms)
        return None if isinstance(again, _Lacking) else again

    def _worth_reading(self, lacking: _Lacking) -> bool:
        """Whether the turn should read the stems the copy lacks itself: they are rare
        (`inline_rows`), or reading them costs less than FTS5's ranking of every row of
        every stem of the turn would (an entry read costs READ_COST entries ranked)."""
        missing = self._rows_of(lacking.stems)
        if missing <= self._inline_rows:
            return True
        held = [stem for stem in lacking.asked if stem not in lacking.stems]
        return missing * READ_COST <= missing + self._rows_of(held)

    def _rows_of(self, stems: Sequence[str]) -> int:
        """How many rows hold each of `stems`, summed: as the warm-up counted them, or
        looked up (a common stem's count reads its entries: milliseconds)."""
        conn = self._connect()
        counts = (self._rows.get(stem) for stem in stems)
        return sum(
            fts.rows_holding(conn, stem) if rows is None else rows
            for stem, rows in zip(stems, counts, strict=True)
        )

    def _lookup(
        self, terms: Sequence[str]
    ) -> tuple[_Copy, list[str], list[_Postings]] | _Lacking | None:
        """As `_kept`, or the stems the copy lacks."""
        conn = self._connect()
        with self._lock, _snapshot(conn):
            copy = None if self._closed else self._current(conn)
            made = None if copy is None else self._stems(conn, terms)
            if copy is None or made is None:
                return None
            missing = [stem for stem in made if stem not in copy.postings]
            if missing:
                return _Lacking(missing, made)
            return copy, made, copy.used(made)

    def _cap(self, rows: int) -> int:
        """How many postings entries the copy of a table of `rows` keeps."""
        if self._max_entries is not None:
            return self._max_entries
        return max(MIN_ENTRIES, ENTRIES_PER_ROW * rows)

    def _stems(self, conn: sqlite3.Connection, terms: Sequence[str]) -> list[str] | None:
        """Each term's one token as the index holds it (None if one is not one token)."""
        unknown = [term for term in terms if term not in self._stem_of]
        if unknown:
            if len(self._stem_of) > MAX_TERMS:
                self._stem_of.clear()
            for term, tokens in zip(unknown, fts.stems(conn, unknown), strict=True):
                self._stem_of[term] = tokens[0] if len(tokens) == 1 else None
        made = [self._stem_of.get(term) for term in terms]
        return None if None in made else [stem for stem in made if stem is not None]

    def _current(self, conn: sqlite3.Connection) -> _Copy | None:
        state = fts.index_state(conn)
        if state.rows < self._min_rows:
            return None  # FTS5 alone is as fast, and nothing is read behind the turns
        copy = self._copy
        if copy is None:
            self._start(self._build)
            return None
        if state == copy.state:
            return copy
        edited = _edited(conn, copy, state.edits, self._grouped)
        grown = _grown(conn, edited, state, self._grouped) if edited is not None else None
        self._copy = grown
        if grown is None:
            self._start(self._build)
        return grown

    def _read_wanted(self) -> None:
        """Every stem a turn wanted and did not find, until none is left (turns that come
        meanwhile add theirs)."""
        while not self._closed:
            with self._lock:
                stems = sorted(self._wanted)
            if not stems:
                return
            self._read_postings(stems)
            with self._lock:
                self._wanted.difference_update(stems)

    def _read_postings(self, stems: Sequence[str]) -> None:
        """Reads stems' postings at the copy's state, outside the lock (a common word's are
        tens of milliseconds to read), and keeps them if the copy is still at that state."""
        conn = self._connect()
        with _snapshot(conn):
            with self._lock:  # the copy brought to this snapshot's state first
                copy = self._current(conn)
            if copy is None:
                return
            state = copy.state
            stems = [stem for stem in stems if stem not in copy.postings]
            read = {
                stem: _postings(fts.postings(conn, stem), copy.sizes, state.last_id, self._grouped)
                for stem in stems
            }
        with self._lock:
            copy = self._copy
            if copy is None or copy.state != state:
                return  # the next turn that needs them asks again
            copy.keep(read, self._cap(state.rows))

    def close(self) -> None:
        """The store is closing: the work behind the turns is stopped and waited for (its
        connection is about to be closed under it), and the copy is let go, saved for
        the next start."""
        with self._lock:
            self._closed = True
            copy, self._copy = self._copy, None
            worker, conn = self._worker, self._worker_conn
        if worker is not None and worker is not threading.current_thread():
            if conn is not None:
                conn.interrupt()  # a long read ends now, with an error `_run` expects
            worker.join()
        if copy is not None and self._saved is not None:
            _save(copy.settled(), self._saved)

    def _start(self, work: Callable[[], None]) -> None:
        """One piece of work behind the turns at a time; others wait for a later turn."""
        if self._worker is None and not self._closed:
            self._worker = threading.Thread(target=self._run, args=(work,), daemon=True)
            self._worker.start()

    def _claim(self) -> bool:
        """Makes the calling thread the one worker, once the work before it is done;
        False if the copy was closed meanwhile."""
        while True:
            with self._lock:
                if self._closed:
                    return False
                worker = self._worker
                if worker is None:
                    self._worker = threading.current_thread()
                    return True
            worker.join()

    def _warm(self, keep_on: Callable[[], bool]) -> None:
        conn = self._connect()
        with _snapshot(conn):
            rows = fts.index_state(conn).rows
        if rows < self._min_rows:
            return
        copy = self._reopened(conn)
        if copy is None:
            self._build()
        cap = self._cap(rows)
        commonest = fts.stems_by_rows(conn)
        self._rows = dict(commonest)
        read = copy.entries if copy is not None else 0
        if copy is not None:
            commonest = [(stem, held) for stem, held in commonest if stem not in copy.postings]
        for batch in _batches(commonest, WARM_ENTRIES):
            read += sum(held for _, held in batch)
            if read > cap or self._closed or not keep_on():
                break
            self._read_wanted()  # a turn's first
            self._read_postings([stem for stem, _ in batch])
        self._read_wanted()

    def _reopened(self, conn: sqlite3.Connection) -> _Copy | None:
        """The copy saved by the last `close`, brought to the index's state (None when
        there is none, or the log of changes no longer reaches back to it: then it is read
        anew)."""
        copy = _load(self._saved) if self._saved is not None else None
        if copy is None:
            return None
        with self._lock, _snapshot(conn):
            if self._closed or self._copy is not None:
                return None
            self._copy = copy
            current = self._current(conn)  # grown by the rows added since, or dropped
            if current is None:
                self._copy = None
            return current

    def _run(self, work: Callable[[], None]) -> None:
        try:
            self._worker_conn = self._connect()
            work()
        except sqlite3.Error as exc:  # interrupted by `close`: FTS5 answered meanwhile
            log.debug("the whole-table BM25 stopped: %s", exc)
        finally:
            with self._lock:
                self._worker, self._worker_conn = None, None

    def _build(self) -> None:
        """Each row's length, in a thread of its own (about a second per 200,000 rows)."""
        conn = self._connect()
        with _snapshot(conn):
            state = fts.index_state(conn)
            sizes = _sizes(fts.row_sizes(conn, 0), state.last_id)
        with self._lock:
            if not self._closed:
                self._copy = _Copy(state, sizes)


def _batches(stems: Sequence[tuple[str, int]], entries: int) -> Iterator[Sequence[tuple[str, int]]]:
    """(stem, rows) in order, in runs of about `entries` rows (a stem holding more alone)."""
    start, held = 0, 0
    for end, (_, rows) in enumerate(stems, 1):
        held += rows
        if held >= entries:
            yield stems[start:end]
            start, held = end, 0
    if start < len(stems):
        yield stems[start:]


def _edited(conn: sqlite3.Connection, copy: _Copy, edits: int, grouped: int) -> _Copy | None:
    """The copy with the rows edited or deleted since (`fts.changed_ids`): their lengths
    and the totals now, their postings owed to each stem until it is next used (`_Copy`);
    `_grown` then checks the totals against FTS5's. None when the log no longer reaches
    back to the copy's state: it is read anew."""
    if edits == copy.state.edits:
        return copy
    changed = fts.changed_ids(conn, copy.state.edits, edits)
    if changed is None:
        return None
    old = [i for i in changed if i <= copy.state.last_id]
    now = fts.sizes_of(conn, old)
    sizes = copy.sizes.copy()
    before = int(sizes[old].sum())
    sizes[old] = [now.get(i, 0) for i in old]
    read = fts.postings_of(conn, list(now)) if now and copy.postings else {}
    fresh = {stem: found for stem, found in read.items() if stem in copy.postings}
    rows = copy.state.rows - len(old) + len(now)
    tokens = copy.state.tokens - before + sum(now.values())
    state = replace(copy.state, rows=rows, tokens=tokens, edits=edits)
    edited = _moved(copy, state, sizes)
    edited.changed(_Change(np.array(old, dtype=np.int64), fresh, grouped))
    return edited


def _moved(copy: _Copy, state: fts.IndexState, sizes: Floats) -> _Copy:
    """A copy at a new state sharing the postings: a turn may be scoring with the old one
    outside the lock, so that one is never changed."""
    return replace(
        copy,
        state=state,
        sizes=sizes,
        postings=dict(copy.postings),
        changes=list(copy.changes),
        behind=dict(copy.behind),
    )


def _among(ids: Ids, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which of `ids` are among `rows` (sorted; a forget's chunk is a few dozen)."""
    if not len(rows):
        return np.zeros(len(ids), dtype=np.bool_)
    at = np.minimum(np.searchsorted(rows, ids), len(rows) - 1)
    found: npt.NDArray[np.bool_] = rows[at] == ids
    return found


def _grown(
    conn: sqlite3.Connection, copy: _Copy, state: fts.IndexState, grouped: int
) -> _Copy | None:
    """The copy with the rows added since (None unless rows were only added, or the totals
    differ from FTS5's)."""
    added = fts.row_sizes(conn, copy.state.last_id)
    tokens = sum(size for _, size in added)
    if (state.rows, state.tokens) != (copy.state.rows + len(added), copy.state.tokens + tokens):
        return None  # a row came in under an old id, or the index changed otherwise
    sizes = _sizes(added, state.last_id)
    # Every added id is past the copy's last; the last rows may have been deleted (their
    # sizes are 0, and the next row may take an id past the new last).
    kept = min(len(copy.sizes), len(sizes))
    sizes[:kept] = copy.sizes[:kept]
    grown = _moved(copy, state, sizes)
    if copy.postings:
        for stem, new in fts.new_postings(conn, copy.state.last_id).items():
            if stem in grown.postings:
                more = grown.pairs.numbered(_postings(new, sizes, state.last_id, grouped))
                grown.postings[stem] = grown.postings[stem].extended(more)
                grown.entries += len(new)
    return grown


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


def _id_kind(last_id: int) -> type[np.signedinteger]:
    """Ids held in 32 bits while every id up to `last_id` fits."""
    return np.int32 if last_id <= np.iinfo(np.int32).max else np.int64


def _sizes(sizes: Sequence[tuple[int, int]], last_id: int) -> Floats:
    lengths = np.zeros(last_id + 1)
    ids = np.fromiter((row for row, _ in sizes), dtype=_id_kind(last_id), count=len(sizes))
    lengths[ids] = np.fromiter((size for _, size in sizes), dtype=np.float32, count=len(sizes))
    return lengths


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
