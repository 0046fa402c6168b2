"""What an engine's SQL differs in, given once per engine: its parameter mark, how one
parameter holds a list of ids, its aggregates, and its clause for claiming rows.

Every statement of the repositories is written once, with `?` for a parameter and these
fragments by name (`{ids}`, `{id_list}`, `{claim}`), and rendered for its engine by
`Dialect.sql`, once per statement. A new engine gives a `Dialect` and nothing else of the
shared SQL.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """An engine's SQL fragments."""

    name: str
    mark: str  # a parameter's placeholder
    # A subquery of the ids one parameter holds (as `id_param` gives them).
    ids: str
    # The aggregate of a query's ids as one comma-separated text (read by `joined_ids`).
    id_list: str
    # The aggregate of rows as one JSON text of arrays; `{}` is where the columns go.
    rows_as_json: str
    # The clause that claims the rows a read returns, for engines that several processes
    # write at once ("" where one process writes).
    claim: str

    def sql(self, template: str) -> str:
        """`template` (`?` marks, fragments by name) as this engine runs it."""
        return _rendered(self, template)

    @staticmethod
    def id_param(ids: Iterable[int]) -> str:
        """The parameter `ids` reads: the ids as one JSON list, whatever their number."""
        return json.dumps([int(i) for i in ids])


@functools.lru_cache(maxsize=1024)
def _rendered(dialect: Dialect, template: str) -> str:
    filled = template.format(ids=dialect.ids, id_list=dialect.id_list, claim=dialect.claim)
    if dialect.mark == "?":
        return filled
    return filled.replace("%", "%%").replace("?", dialect.mark)


SQLITE = Dialect(
    name="sqlite",
    mark="?",
    ids="(SELECT value FROM json_each(?))",
    id_list="group_concat(id)",
    rows_as_json="json_group_array(json_array({}))",
    claim="",
)
POSTGRES = Dialect(
    name="postgresql",
    mark="%s",
    ids="(SELECT value::bigint FROM jsonb_array_elements_text(?::jsonb))",
    id_list="string_agg(id::text, ',')",
    rows_as_json="json_agg(json_build_array({}))::text",
    claim="FOR UPDATE SKIP LOCKED",
)
