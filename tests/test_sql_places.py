"""The lint that keeps SQL in the repositories (`tools/sql_places.py`) finds SQL written
elsewhere, and finds none in the source as it is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).parent.parent / "tools" / "sql_places.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sql_places", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sql_outside_the_repositories_is_named_by_file_and_line(tmp_path: Path) -> None:
    tool = _tool()
    (tmp_path / "memory" / "repositories").mkdir(parents=True)
    (tmp_path / "memory" / "repositories" / "fine.py").write_text('Q = "SELECT 1 FROM x"\n')
    (tmp_path / "memory" / "service.py").write_text(
        'def f(t):\n    """Select what matters."""\n    return f"UPDATE episodes SET a = {t}"\n'
    )
    (tmp_path / "client.py").write_text('METHOD = "DELETE"\nQ = "DELETE FROM episodes"\n')
    found = tool.misplaced(tmp_path)
    assert [line.split(": SQL")[0] for line in found] == [
        f"{tmp_path / 'client.py'}:2",
        f"{tmp_path / 'memory' / 'service.py'}:3",
    ]


def test_the_source_keeps_its_sql_where_the_architecture_says() -> None:
    assert _tool().misplaced() == []
