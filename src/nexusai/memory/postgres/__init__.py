"""The PostgreSQL engine: the store, its keyword index and its migrations."""
