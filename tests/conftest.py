import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a `slow` test first, each file's tests and the other files in collection order: with
    `--dist loadfile --no-loadscope-reorder` (pyproject.toml) the long files start at once, one per worker, and
    the short ones fill in around them, instead of a long file starting last while the other worker idles."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)
