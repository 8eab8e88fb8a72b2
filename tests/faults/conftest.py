"""The fault tests launch clusters the way tests/core/test_launch.py does; its fixture is shared."""

from tests.core.test_launch import launches

__all__ = ["launches"]
