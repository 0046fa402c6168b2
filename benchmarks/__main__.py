"""Run the benchmarks: `python -m benchmarks [NAME ...]` (all of them by default)."""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = {
    "fts": "benchmarks.bench_fts",
    "vectors": "benchmarks.bench_vectors",
    "context": "benchmarks.bench_context",
    "split": "benchmarks.bench_split",
    "entities": "benchmarks.bench_entities",
    "load": "benchmarks.bench_load",
    "entity-precision": "benchmarks.bench_entity_precision",
    "embedders": "benchmarks.bench_embedders",
    "import-long": "benchmarks.bench_import_long",
    "long-writes": "benchmarks.bench_long_writes",
    "import-short": "benchmarks.bench_import_short",
    "extracting": "benchmarks.bench_extracting",
    "extract-long": "benchmarks.bench_extract_long",
    "export": "benchmarks.bench_export",
    "http": "benchmarks.bench_http",
    "soak": "benchmarks.bench_soak",
    "curve": "benchmarks.bench_curve",
    "project": "benchmarks.bench_project",
    "search": "benchmarks.bench_search",
    "start": "benchmarks.bench_start",
    "recommended": "benchmarks.bench_recommended",
    "budgets": "benchmarks.bench_budgets",
    "memory": "benchmarks.bench_memory",
    "keyword-scale": "benchmarks.bench_keyword_scale",
    "pg-keyword": "benchmarks.bench_pg_keyword",
    "vacuum": "benchmarks.bench_vacuum",
    "index-build": "benchmarks.bench_index_build",
    "pg": "benchmarks.bench_pg",
    "langgraph": "benchmarks.bench_langgraph",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="default: all")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    for name in args.names or list(BENCHMARKS):
        module = importlib.import_module(BENCHMARKS[name])
        module.run(quick=args.quick)


if __name__ == "__main__":
    main()
