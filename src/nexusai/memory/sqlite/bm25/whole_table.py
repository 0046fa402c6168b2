"""`WholeTableBM25`: the copy kept in step with FTS5, warmed at a start, built and
brought up to date behind the turns, answering a whole-table search when it can."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.bm25.changes import _Copy, _edited, _grown, _Lacking
from nexusai.memory.sqlite.bm25.postings import GROUPED, Ids, _Postings, _postings, _sizes
from nexusai.memory.sqlite.bm25.saved import _load, _save, _snapshot
from nexusai.memory.sqlite.bm25.scoring import _best, _Scratch

log = logging.getLogger("nexusai.memory.sqlite.bm25")


# Kept postings, 8 bytes an entry: at most this many entries a row of the table, and never
# fewer than MIN_ENTRIES (48 MB). The stems asked longest ago go first and are read again
# when asked. It grows with the table because what turns ask does: 140 realistic questions
# keep 12.9 million entries at 1,000,000 rows, and a smaller cap would read them over and
# over while FTS5 answered.
ENTRIES_PER_ROW = 32


MIN_ENTRIES = 6_000_000


MAX_TERMS = 200_000  # query terms whose tokens are kept


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
