"""How Qdrant Edge keeps an index's vectors (the layouts of NEXUS_VECTOR_MEMORY), and the
checks that keep its memory-mapped files from ending the process."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable
from pathlib import Path

import qdrant_edge as edge

# How the vectors are kept (NEXUS_VECTOR_MEMORY). `ram`: every float in memory, 1.5 KB a
# MiniLM vector. `compact`: an int8 copy pinned in memory (a quarter of that) is what a
# search scans, and the float vectors stay in their file, read back only to rescore the
# best OVERSAMPLING x limit candidates, so that the order returned is by the exact cosine.
OVERSAMPLING = 2.0
# Qdrant Edge writes through memory-mapped files, and a write into a page that a full disk
# has no block for kills the process (SIGBUS) rather than failing. So the index takes no
# write while less than this is free (a new 32 MiB chunk of vectors and of its log, and
# room): the episodes are stored all the same, their vectors pending until space is freed.
FREE_BYTES_MIN = 96 * 2**20


# A compact index ranks by its int8 copy; its best OVERSAMPLING x limit are then scored
# again by their stored vectors, so that scores are exact cosines (an index in `ram`
# has no copy: nothing to rescore).
RESCORED = edge.SearchParams(
    quantization=edge.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
)


def vector_params(dimension: int, layout: str) -> edge.EdgeVectorParams:
    """What Qdrant Edge is told of the vectors of an index in `layout`."""
    if layout == "ram":
        return edge.EdgeVectorParams(size=dimension, distance=edge.Distance.Cosine)
    # The 0.99 quantile clips the rare outlying coordinate rather than widening every
    # step of the int8 scale for it (Qdrant's recommendation).
    quantized = edge.ScalarQuantizationConfig(
        edge.ScalarType.Int8, quantile=0.99, memory=edge.Memory.Pinned
    )
    return edge.EdgeVectorParams(
        size=dimension,
        distance=edge.Distance.Cosine,
        memory=edge.Memory.Cold,
        quantization_config=quantized,
    )


def layout_of(path: Path) -> str:
    """The layout a shard on disk is in (its configuration file says), `ram` if unknown."""
    try:
        config = json.loads((path / "edge_config.json").read_text())
        quantized = config["vectors"][""].get("quantization_config")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "ram"
    return "compact" if quantized else "ram"


def check_sizes(path: Path, dimension: int) -> None:
    """Raises if a file of float vectors is shorter than its segment says. Qdrant Edge maps
    those files rather than reading them (in the compact layout, and while points are
    appended in either): a search or write reaching past a truncated file's end would
    kill the process (SIGBUS) instead of failing the open, and the index be set aside."""
    row = dimension * 4  # float32
    for storage in path.glob("segments/*/vector_storage"):
        chunked = storage / "vectors" / "config.json"  # a segment points are appended to
        if chunked.exists():
            wanted = json.loads(chunked.read_text())["chunk_size_vectors"] * row
            _at_least(wanted, storage.glob("vectors/chunk_*.mmap"))
        counted = storage / "quantized.meta.json"  # an optimized, quantized segment
        if counted.exists():
            count = json.loads(counted.read_text())["vector_parameters"]["count"]
            _at_least(4 + count * row, [storage / "matrix.dat"])  # after a 4-byte header


def _at_least(size: int, files: Iterable[Path]) -> None:
    for file in files:
        if (held := file.stat().st_size) < size:
            raise ValueError(f"{file.name} holds {held} bytes of {size}")


def check_room(path: Path) -> None:
    """Raises ENOSPC while the disk has less than FREE_BYTES_MIN free (see there)."""
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    if free < FREE_BYTES_MIN:
        raise OSError(
            errno.ENOSPC,
            f"the disk holding the vector index has {free // 2**20} MB free, under the"
            f" {FREE_BYTES_MIN // 2**20} MB it keeps in reserve; vectors wait until space is"
            " freed",
        )
