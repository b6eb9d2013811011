"""Writing a wired host configuration, its backups, and undo.

Rules:

1. Before a write the exact original bytes are copied into ``host-backups/`` beside Signoff's
   configuration (0700; copies 0600, since they hold the hosts' secrets), and a manifest records
   the file, its copy, the SHA-256 of what Signoff wrote and when. The file is replaced
   atomically, keeping its mode, and the write is refused when the file changed since it was
   read.
2. Undo restores the newest copy of a file byte for byte, and refuses when the file is no longer
   what Signoff wrote (the host or a person edited it since) unless forced; a forced undo first
   keeps a copy of what it overwrites.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from core import private_files
from core.hosts import _BOM, BACKUP_DIR, MANIFEST, Host, HostConfigError, WirePlan, apply_import


@dataclass(frozen=True)
class Backup:
    original: Path  # the file Signoff wrote
    backup: Path  # the copy of what was there before
    host: Host
    written_sha256: str  # what Signoff wrote
    time: str
    undone: str | None = None  # when it was undone


def backup_dir(config_path: Path) -> Path:
    return config_path.parent / BACKUP_DIR


def write_wire(plan: WirePlan, config_path: Path) -> Backup:
    """Import what the plan imports, keep a copy of the file, then write the plan's text."""
    hostfile = plan.hostfile
    path = hostfile.path
    if not plan.writable:
        raise HostConfigError(
            f"{path} has comments or trailing commas, which Signoff would lose: make the change"
            " the preview shows by hand"
        )
    if not plan.changed:
        raise HostConfigError(f"{path}: nothing to change")
    target = path.resolve()
    if _read(target) != hostfile.raw:
        raise HostConfigError(f"{path} changed since it was read: read it again")
    folder = _backups(config_path)
    if plan.imports:
        apply_import(config_path, plan.imports, [item.key for item in plan.imports])
    data = (_BOM if hostfile.raw.startswith(_BOM) else b"") + plan.text.encode("utf-8")
    copied = _keep(folder, hostfile.host, target, hostfile.raw)
    _replace(target, data)
    record = Backup(
        target, copied, hostfile.host, hashlib.sha256(data).hexdigest(), _now().isoformat()
    )
    _save_manifest(folder, [*_load_manifest(folder), record])
    return record


def backups(config_path: Path) -> list[Backup]:
    """Every write Signoff made to a host's file, oldest first."""
    return _load_manifest(backup_dir(config_path))


def undo(path: Path, config_path: Path, *, force: bool = False) -> Backup:
    """Restore the file as it was before Signoff's newest write to it that is not undone yet."""
    target = path.resolve()
    folder = backup_dir(config_path)
    records = _load_manifest(folder)
    index = next(
        (i for i in reversed(range(len(records)))
         if records[i].original == target and records[i].undone is None),
        None,
    )  # fmt: skip
    if index is None:
        raise HostConfigError(f"{path}: Signoff has no write of this file to undo")
    record = records[index]
    try:
        current: bytes | None = target.read_bytes()
    except FileNotFoundError:
        current = None
    edited = current is None or hashlib.sha256(current).hexdigest() != record.written_sha256
    if edited and not force:
        raise HostConfigError(
            f"{path} changed since Signoff wrote it on {record.time}: undoing would lose those"
            " changes (signoff hosts undo --force restores the copy anyway)"
        )
    try:
        original = record.backup.read_bytes()
    except OSError as e:
        raise HostConfigError(f"{record.backup}: the copy cannot be read: {e.strerror}") from None
    if edited and current is not None:
        _keep(_backups(config_path), record.host, target, current, "before-undo")
    _replace(target, original)
    records[index] = dataclasses.replace(record, undone=_now().isoformat())
    _save_manifest(folder, records)
    return records[index]


def _now() -> datetime:
    return datetime.now(UTC)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise HostConfigError(f"{path}: cannot be read: {e.strerror}") from None


def _backups(config_path: Path) -> Path:
    folder = backup_dir(config_path)
    try:
        private_files.make_dir(folder, repair=True)
    except OSError as e:
        raise HostConfigError(f"{folder}: cannot keep copies here: {e.strerror}") from None
    return folder


def _keep(folder: Path, host: Host, target: Path, data: bytes, tag: str = "") -> Path:
    """A new 0600 file in ``folder`` holding ``data``."""
    stamp = _now().strftime("%Y%m%dT%H%M%S%fZ")
    for n in range(1, 100):
        parts = [stamp, host.value, *([tag] if tag else []), *([str(n)] if n > 1 else [])]
        copied = folder / f"{'-'.join(parts)}-{target.name}"
        try:
            fd = os.open(copied, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as e:
            raise HostConfigError(f"{copied}: cannot keep a copy: {e.strerror}") from None
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return copied
    raise HostConfigError(f"{folder}: too many copies named {stamp}")


def _replace(target: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` beside ``target`` and move it into place, keeping ``target``'s mode."""
    if mode is None:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o600
    try:
        fd, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as e:
        raise HostConfigError(f"{target}: cannot be written: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as e:
        Path(temporary).unlink(missing_ok=True)
        raise HostConfigError(f"{target}: cannot be written: {e.strerror}") from None


def _load_manifest(folder: Path) -> list[Backup]:
    path = folder / MANIFEST
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return [
            Backup(
                Path(w["original"]),
                folder / w["backup"],
                Host(w["host"]),
                w["written_sha256"],
                w["time"],
                w.get("undone"),
            )
            for w in document["writes"]
        ]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HostConfigError(
            f"{path}: Signoff's record of its writes is unreadable ({e})"
        ) from None


def _save_manifest(folder: Path, records: Sequence[Backup]) -> None:
    writes = [
        {"original": str(r.original), "backup": r.backup.name, "host": r.host.value,
         "written_sha256": r.written_sha256, "time": r.time, "undone": r.undone}
        for r in records
    ]  # fmt: skip
    text = json.dumps({"version": 1, "writes": writes}, indent=2, ensure_ascii=False) + "\n"
    _replace(folder / MANIFEST, text.encode("utf-8"), mode=0o600)
