"""The store's SQL, one repository per aggregate, each a small class over the store's
connections and its engine's `Dialect` (`dialect.py`): `meta`, `projects`, `sessions`,
`episodes` (with `filters`, `deadlines`, `neighbours`), `imports`, `derived` (vector and
entity states), `entities`, `api_keys`, and `keywords` (the one implemented per engine).
`EpisodeStore` holds them (`store.episodes.add(...)`); docs/ARCHITECTURE.md says how to
add an engine."""
