"""Benchmark loaders, metrics and runners."""
