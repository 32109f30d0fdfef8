"""The pytest entry point of the test kit (``pytest11: ctxrules``): one fixture,
``ctxrules_kit``, which hands a test the kit (``ctxrules.testing``).

Light on purpose: pytest loads this module in every test run of every project that
has ctxrules installed, so it imports nothing of ctxrules until the fixture is used.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

__all__ = ["ctxrules_kit"]


@pytest.fixture
def ctxrules_kit() -> ModuleType:
    """The test kit module ``ctxrules.testing``, for tests that prefer a fixture to an import."""
    return importlib.import_module("ctxrules.testing")
