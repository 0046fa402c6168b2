"""The copy at one state of the index, and the changes (rows edited, deleted, added)
that reach each stem's postings when it is next used."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.bm25.postings import (
    Floats,
    _Pairs,
    _Postings,
    _postings,
    _Read,
    _sizes,
)


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
