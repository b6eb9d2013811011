"""Which host a call comes from (docs/decisions/0027-each-host-sees-its-own-calls.md).

Several hosts (two Claude Code windows, Cursor) each launch their own ``signoff proxy`` on one
database. A call's result is handed only to the host that made it, and ``signoff_status`` lists
only its requests: for that, each run the proxy begins records the host it is for.

Rules:

1. A host is the application it says it is (the ``clientInfo`` name and version of its
   ``initialize``) together with the process that launched this proxy: its pid, its start time
   and the boot it belongs to (``/proc/<ppid>/stat`` and ``/proc/sys/kernel/random/boot_id`` on
   Linux; a pid alone is reused). Two windows of one application are two launching processes,
   so two hosts; the same host restarting its proxy is the same process, so the same host.
2. Where the launching process cannot be told apart that way (another OS, ``/proc`` hidden or
   unreadable), the host is this proxy process alone (a random value drawn at its start): a
   restarted proxy is then a new host, whose identical call waits for the operator as a
   duplicate rather than collecting. Recognising too little fails closed; never too much.
3. The id recorded is SHA-256 over the canonical identity; a readable label goes beside it in
   the run's ``run.started`` event, for the history. Neither is a secret: the launching
   process, not the name a host gives, is what another host cannot claim.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import canonical

PROC = Path("/proc")


@dataclass(frozen=True)
class Launcher:
    """The process that launched this proxy, as exactly as this OS lets us say (rule 1/2)."""

    pid: int
    identity: dict[str, Any]  # what tells it apart from any other process, ever
    exact: bool  # False: the fallback of rule 2 (this proxy process alone)


@dataclass(frozen=True)
class Host:
    id: str  # SHA-256 hex over the canonical identity (rule 3)
    label: str  # for people: the application and its launching process


def launcher(pid: int | None = None, *, proc: Path = PROC) -> Launcher:
    """The launching process of this proxy (its parent), read once when the proxy starts."""
    ppid = os.getppid() if pid is None else pid
    try:
        stat = (proc / str(ppid) / "stat").read_text(encoding="utf-8", errors="replace")
        # The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        started = int(fields[19])  # field 22, starttime: clock ticks after boot
        boot = (proc / "sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except (OSError, ValueError, IndexError):
        unique = {"proxy": os.getpid(), "drawn": secrets.token_hex(16)}
        return Launcher(ppid, unique, exact=False)
    return Launcher(ppid, {"pid": ppid, "started": started, "boot": boot}, exact=True)


def identify(client_info: Any, launched_by: Launcher) -> Host:
    """The host of a call: ``client_info`` (the object of ``initialize``'s ``clientInfo``, or
    None when the host gave none) and the launching process."""
    info = client_info if isinstance(client_info, dict) else {}
    name, version = (_text(info.get(field)) for field in ("name", "version"))
    identity = {"client": {"name": name, "version": version}, "launcher": launched_by.identity}
    who = f"{name} {version}".strip() or "a host that gave no name"
    how = "" if launched_by.exact else ", this proxy process only"
    return Host(canonical.sha256_hex(identity), f"{who} (process {launched_by.pid}{how})")


def _text(value: Any) -> str:
    """A name as the host gave it, made safe to hash and to show: at most 200 characters, any
    lone surrogate replaced."""
    text = value if isinstance(value, str) else ""
    return text[:200].encode("utf-8", "replace").decode("utf-8")
