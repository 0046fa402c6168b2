"""Benchmarks: `make bench` (or `python -m benchmarks NAME...`) prints one table each."""
