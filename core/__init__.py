"""Signoff's runtime: the store, the audit chain and the gate. Never imports Qt.

Usable as a library by any Python agent loop; the public names are re-exported here.
"""

from core.approvals import approve, reject
from core.chain import ChainVerifier, Head
from core.decisions import Decision
from core.driver import Agent, Driver
from core.gate import Gate, GateConfig, Observation, Session, Verdict, VerdictOutcome
from core.heads import HeadStore, KeyringHeadStore, MemoryHeadStore
from core.limits import Limits
from core.policy import ConfigPolicy, DefaultPolicy, Policy, PolicyDecision, PolicyRequest
from core.recheck import recheck
from core.store import Store, Transaction
from core.tools import SideEffect, Tool
from core.verify import Anchor, Report, verify

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
    "KeyringHeadStore",
    "Limits",
    "MemoryHeadStore",
    "Observation",
    "Policy",
    "PolicyDecision",
    "PolicyRequest",
    "Report",
    "Session",
    "SideEffect",
    "Store",
    "Tool",
    "Transaction",
    "Verdict",
    "VerdictOutcome",
    "approve",
    "recheck",
    "reject",
    "verify",
]
