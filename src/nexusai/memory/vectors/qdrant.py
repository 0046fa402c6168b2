"""A Qdrant server or cluster (NEXUS_QDRANT_URL), through qdrant-client (extra `qdrant`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nexusai.memory.vectors.base import SCOPE_KEY, VectorPoint, qdrant_conditions, scope_payload
from nexusai.models import finds_nothing

if TYPE_CHECKING:  # an optional extra: imported where it is used
    from qdrant_client import models


class QdrantVectorIndex:
    """A Qdrant server or cluster through qdrant-client (or its local mode, in tests)."""

    def __init__(self, client: object, collection: str, dimension: int) -> None:
        from qdrant_client import QdrantClient

        assert isinstance(client, QdrantClient)
        self._client = client
        self.collection = collection
        self.dimension = dimension
        self.damaged: str | None = None  # a server's collection is never set aside here
        self._ensure_collection()

    def _ensure_collection(self) -> None:
        from qdrant_client import models

        if self._client.collection_exists(self.collection):
            return
        self._client.create_collection(
            self.collection,
            vectors_config=models.VectorParams(
                size=self.dimension, distance=models.Distance.COSINE
            ),
        )
        self._client.create_payload_index(
            self.collection, SCOPE_KEY, field_schema=models.PayloadSchemaType.INTEGER
        )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        from qdrant_client import models

        if points:
            self._client.upsert(
                self.collection,
                [
                    models.PointStruct(
                        id=p.id,
                        vector=[float(x) for x in p.vector],
                        payload={SCOPE_KEY: scope_payload(p.scope)},
                    )
                    for p in points
                ],
            )

    def delete(self, ids: Sequence[int]) -> None:
        from qdrant_client import models

        if ids:
            self._client.delete(self.collection, models.PointIdsList(points=[int(i) for i in ids]))

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        only_ids: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        from qdrant_client import models

        if finds_nothing(session_ids, limit) or finds_nothing(only_ids, limit):
            return []
        must, must_not = qdrant_conditions(
            session_ids,
            exclude_ids,
            only_ids,
            _in_sessions,
            _has_id,
        )
        response = self._client.query_points(
            self.collection,
            query=[float(x) for x in vector],
            query_filter=models.Filter(must=must or None, must_not=must_not or None),
            limit=limit,
        )
        return [(int(p.id), float(p.score)) for p in response.points]

    def count(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, limit=1000, offset=offset, with_payload=False
            )
            found.update(int(r.id) for r in records)
            if offset is None:
                return found

    def reset(self, dimension: int) -> None:
        self._client.delete_collection(self.collection)
        self.dimension = dimension
        self._ensure_collection()

    def optimize(self) -> None:
        """The server optimizes on its own schedule."""

    def flush(self) -> None:
        """The server flushes on its own schedule."""

    optimizing = False  # the server optimizes its indexes itself, in its own process

    def optimize_behind(self) -> bool:
        return False

    def close(self) -> None:
        self._client.close()


def _in_sessions(ids: list[int]) -> models.Condition:
    from qdrant_client import models

    return models.FieldCondition(key=SCOPE_KEY, match=models.MatchAny(any=ids))


def _has_id(ids: list[int]) -> models.Condition:
    from qdrant_client import models

    return models.HasIdCondition(has_id=list(ids))
