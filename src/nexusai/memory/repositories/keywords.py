"""Keyword search (BM25), one implementation per engine: SQLite's FTS5 with a copy of the
whole table for unscoped searches (`sqlite.fts`), PostgreSQL's own index (`postgres.fts`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from nexusai.memory.repositories.columns import Where
from nexusai.memory.repositories.filters import filter_sql
from nexusai.models import Episode, EpisodeFilter


class Keywords(ABC):
    def search(
        self,
        query: str,
        limit: int = 20,
        session_ids: Sequence[int] | None = None,
        budget: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        """Episodes matching the words of `query`, best BM25 first, within the sessions given
        (all when None; none when empty). Query syntax in `query` is searched for, never
        parsed. With a `budget`, the query's commonest terms are left out past that many
        index entries (`keywords.within_budget`); 0 searches every term, as the spec says.
        With a `rule`, only the episodes it keeps are ranked: `limit` of them come back
        whenever that many match."""
        where = None if rule is None or rule.is_empty() else filter_sql(rule)
        return self._search(query, limit, session_ids, budget, where)

    @abstractmethod
    def _search(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int,
        where: Where | None,
    ) -> list[Episode]:
        """`where`: a filter's SQL over the episodes table, applied inside the search."""

    @abstractmethod
    def ok(self) -> bool:
        """Whether the index agrees with the episodes table."""

    @abstractmethod
    def rebuild(self) -> None: ...

    @abstractmethod
    def own_text_matches(self, query: str, ids: Sequence[int]) -> set[int]:
        """Which of these episodes a keyword search for `query` finds by their own text;
        the others it found by the end of the turn before them, indexed with each."""
