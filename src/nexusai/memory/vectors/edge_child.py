"""The child process that builds a copied shard's HNSW graph (see `edge_build`):
`python -m nexusai.memory.vectors.edge_child COPY DIMENSION LAYOUT PARENT_PID`."""

from __future__ import annotations

import sys
from pathlib import Path

from nexusai.memory.vectors.edge import EdgeVectorIndex
from nexusai.memory.vectors.edge_build import dies_with_parent, run_on_idle_cpu


def main(argv: list[str]) -> int:
    """The child: open the copy and build its graph, as `nexus reindex` does."""
    path, dimension, layout, parent = Path(argv[0]), int(argv[1]), argv[2], int(argv[3])
    if not dies_with_parent(parent):
        return 1  # the service is gone already: nobody will swap this copy in
    run_on_idle_cpu()
    index = EdgeVectorIndex(path, dimension, layout=layout)
    try:
        index.optimize()
    finally:
        index.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
