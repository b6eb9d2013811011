"""Signoff's runtime: the store, the audit chain, and (soon) the gate. Never imports Qt.

Usable as a library by any Python agent loop; the public names are re-exported here.
"""

from core.chain import ChainVerifier, Head
from core.heads import HeadStore, KeyringHeadStore, MemoryHeadStore
from core.store import Store, Transaction
from core.verify import Anchor, Report, verify

__all__ = [
    "Anchor",
    "ChainVerifier",
    "Head",
    "HeadStore",
    "KeyringHeadStore",
    "MemoryHeadStore",
    "Report",
    "Store",
    "Transaction",
    "verify",
]
