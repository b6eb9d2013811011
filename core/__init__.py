"""Signoff's runtime: the store, the audit chain and the gate. Never imports Qt.

Usable as a library by any Python agent loop; the public names are re-exported here. Each is
imported on first use (PEP 562), not with the package: every ``signoff`` command imports this
package, and ``signoff pending`` has no use for the gate (decision 0033).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# These two share their name with their module: bound here before anyone imports the module,
# or ``from core import verify`` would find the module (an import binds a submodule on its
# package). Both are light.
from core.recheck import recheck
from core.verify import Anchor, Report, verify

if TYPE_CHECKING:
    from core.approvals import approve, reject
    from core.chain import ChainVerifier, Head
    from core.decisions import Decision
    from core.driver import Agent, Driver
    from core.gate import Gate, GateConfig, Observation, Session, Verdict, VerdictOutcome
    from core.heads import HeadStore, KeyringHeadStore, MemoryHeadStore
    from core.limits import Limits
    from core.model_calls import ModelAttempt, ModelCaller, Usage
    from core.policy.policy import (
        ConfigPolicy,
        DefaultPolicy,
        Policy,
        PolicyDecision,
        PolicyRequest,
    )
    from core.prices import HeuristicCounter, ModelConfig, Price, Prices, TokenCounter
    from core.store import Store, Transaction
    from core.tools import SideEffect, Tool

_HOMES = {
    "core.approvals": ("approve", "reject"),
    "core.chain": ("ChainVerifier", "Head"),
    "core.decisions": ("Decision",),
    "core.driver": ("Agent", "Driver"),
    "core.gate": ("Gate", "GateConfig", "Observation", "Session", "Verdict", "VerdictOutcome"),
    "core.heads": ("HeadStore", "KeyringHeadStore", "MemoryHeadStore"),
    "core.limits": ("Limits",),
    "core.model_calls": ("ModelAttempt", "ModelCaller", "Usage"),
    "core.policy.policy": (
        "ConfigPolicy",
        "DefaultPolicy",
        "Policy",
        "PolicyDecision",
        "PolicyRequest",
    ),
    "core.prices": ("HeuristicCounter", "ModelConfig", "Price", "Prices", "TokenCounter"),
    "core.store": ("Store", "Transaction"),
    "core.tools": ("SideEffect", "Tool"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "Agent",
    "Anchor",
    "ChainVerifier",
    "ConfigPolicy",
    "Decision",
    "DefaultPolicy",
    "Driver",
    "Gate",
    "GateConfig",
    "Head",
    "HeadStore",
    "HeuristicCounter",
    "KeyringHeadStore",
    "Limits",
    "MemoryHeadStore",
    "ModelAttempt",
    "ModelCaller",
    "ModelConfig",
    "Observation",
    "Policy",
    "PolicyDecision",
    "PolicyRequest",
    "Price",
    "Prices",
    "Report",
    "Session",
    "SideEffect",
    "Store",
    "TokenCounter",
    "Tool",
    "Transaction",
    "Usage",
    "Verdict",
    "VerdictOutcome",
    "approve",
    "recheck",
    "reject",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value
