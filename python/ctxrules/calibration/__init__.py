"""Estimates measured against recorded bills, and per-model constants fitted on them.

``read_observations`` reads recorded requests (cassettes, httprr traces) with their
usage; ``estimate_observation`` estimates one as it was sent; ``calibrate`` fits each
model's constants on a user's own recordings (``ctxrules calibrate``) and ``to_toml``
writes them as a profile ``ctxrules.providers.load_profile`` loads.
"""

from __future__ import annotations

from .fit import ModelFit, Parameter, calibrate, errors_summary, to_toml
from .observe import (
    Observation,
    estimate_observation,
    httprr_exchanges,
    read_observations,
    sources_of,
)

__all__ = [
    "ModelFit",
    "Observation",
    "Parameter",
    "calibrate",
    "errors_summary",
    "estimate_observation",
    "httprr_exchanges",
    "read_observations",
    "sources_of",
    "to_toml",
]
