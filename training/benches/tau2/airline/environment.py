"""The airline domain's parts: its tools and its database loader (tau2-bench's airline db.json layout).

Airline has no user-side tools: the user only talks.
"""
from __future__ import annotations

from training.benches.tau2.airline.data_model import check_db
from training.benches.tau2.airline.tools import AirlineTools
from training.benches.tau2.domain import Domain

DOMAIN = Domain(name="airline", tools=AirlineTools, normalize_db=check_db)
