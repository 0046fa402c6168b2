"""The SQLite engine: the store, its FTS5 keyword index and its migrations."""
