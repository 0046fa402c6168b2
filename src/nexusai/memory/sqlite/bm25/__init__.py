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

from nexusai.memory.sqlite.bm25.whole_table import WholeTableBM25

__all__ = ["WholeTableBM25"]
