"""Fixtures of the integration tests: the engine tests' in-memory ``store``."""

from __future__ import annotations

from engine.conftest import store  # noqa: F401 - a fixture, found here by pytest
