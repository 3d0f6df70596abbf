"""The retail domain's parts: its tools and its database loader (tau2-bench's retail db.json layout).

Retail has no user-side tools: the user only talks.
"""
from __future__ import annotations

from training.benches.tau2.domain import Domain
from training.benches.tau2.retail.data_model import check_db
from training.benches.tau2.retail.tools import RetailTools

DOMAIN = Domain(name="retail", tools=RetailTools, normalize_db=check_db)
