"""The memory service: owns all data (SQLite episodes and FTS5, vectors, entities)."""
