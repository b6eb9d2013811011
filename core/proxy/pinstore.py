"""The texts of pinned tools and servers' instructions, kept so that a later change can be
shown as a diff.

The configuration keeps only a pin; this store keeps the bytes the pin was taken over, in a
directory beside the configuration (``manage.pins_dir``).

Rules:

1. A text is kept under its own pin: ``<pin>.json`` holds exactly the tool's ``raw`` bytes,
   ``[<name>,<description or null>,<inputSchema>]``, with ``,<title or null>,<outputSchema or
   null>`` before the closing bracket when it has either (core/proxy/pins.py rule 1), as the
   server sent them. The store is
   addressed by content, so keeping the same tool twice writes nothing new, and a text no
   configuration names any more is harmless.
2. Nothing is kept that does not hash to its pin: ``keep`` checks SHA-256 of the bytes against
   the pin before writing, ``kept`` checks it again after reading. A mismatch raises
   ``PinTextAltered``; a text is never shown as pinned unless it is the one that was pinned.
3. The directory is the owner's only (0700), each text is 0600, and a text is written beside its
   place and moved into it, so a reader never sees half of one. A text already in place that no
   longer hashes to its pin is replaced by the verified one.
4. ``kept`` returns None when nothing is kept under the pin: pinned before Signoff kept texts, or
   the store was cleared. That is a normal state, shown as such, not an error.
5. A server's instructions are kept the same way, as their UTF-8 bytes in ``<pin>.txt``
   (``keep_instructions``, ``kept_instructions``; core/proxy/instructions.py rule 2).
6. A prompt or a resource template is kept the same way, as the bytes of the object the server
   sent, in ``<pin>.item.json`` (``keep_item``, ``kept_item``; core/proxy/catalog.py rule 1).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import private_files
from core.errors import SignoffError
from core.proxy.instructions import pin_of
from core.proxy.pins import MAX_LISTING_BYTES, ListedTool

_PIN = re.compile(r"[0-9a-f]{64}")


class PinTextAltered(SignoffError):
    """A pinned tool's kept text does not hash to its pin: it was changed after it was kept (or
    a text offered for keeping is not the one its pin was taken over)."""


class PinTextUnreadable(SignoffError):
    """A kept text hashes to its pin but is not ``[name, description or null, schema]``, with
    ``title or null, output schema or null`` after it or not."""


@dataclass(frozen=True)
class PinnedTool:
    """A tool as it was when the operator pinned it, read back from its kept text."""

    name: str
    description: str  # "" when the server sent none or null, as in ``ListedTool``
    input_schema: dict[str, Any]
    pin: str
    title: str | None = None
    output_schema: dict[str, Any] | None = None


def keep(directory: Path, tool: ListedTool) -> None:
    """Keep ``tool``'s text under its pin in ``directory`` (created 0700 when missing)."""
    if hashlib.sha256(tool.raw).hexdigest() != tool.pin:
        raise PinTextAltered(
            f"the text of {tool.name} does not hash to its pin {tool.pin[:16]}; it is not kept"
        )
    _write(_path(directory, tool.pin), tool.pin, tool.raw)


def keep_instructions(directory: Path, text: str) -> str:
    """Keep a server's instructions under their pin (rule 5); the pin."""
    pin = pin_of(text)
    _write(_path(directory, pin, ".txt"), pin, text.encode("utf-8"))
    return pin


def keep_item(directory: Path, raw: bytes) -> str:
    """Keep a prompt's or a resource template's bytes under their pin (rule 6); the pin."""
    pin = hashlib.sha256(raw).hexdigest()
    _write(_path(directory, pin, ".item.json"), pin, raw)
    return pin


def kept_item(directory: Path, pin: str) -> bytes | None:
    """A prompt or a template as pinned under ``pin``, or None when it was not kept."""
    return _verified(_path(directory, pin, ".item.json"), pin, "prompt or template")


def _write(path: Path, pin: str, data: bytes) -> None:
    if _holds(path, pin):
        return
    directory = path.parent
    private_files.make_dir(directory, repair=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{pin}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:  # mkstemp made it 0600
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def kept(directory: Path, pin: str) -> PinnedTool | None:
    """The tool as pinned under ``pin``, or None when its text was not kept."""
    path = _path(directory, pin)
    data = _verified(path, pin, "tool")
    if data is None:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        value = None
    match value:
        case [str(name), str() | None as description, dict(schema)]:
            return PinnedTool(name, description or "", schema, pin)
        case [
            str(name),
            str() | None as description,
            dict(schema),
            str() | None as title,
            dict() | None as output_schema,
        ] if title is not None or output_schema is not None:
            return PinnedTool(name, description or "", schema, pin, title, output_schema)
    raise PinTextUnreadable(f"{path} is not a pinned tool's text; remove it")


def kept_instructions(directory: Path, pin: str) -> str | None:
    """A server's instructions as pinned under ``pin``, or None when they were not kept."""
    path = _path(directory, pin, ".txt")
    data = _verified(path, pin, "server's instructions")
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PinTextUnreadable(f"{path} is not UTF-8 text; remove it") from None


def _verified(path: Path, pin: str, what: str) -> bytes | None:
    """The file's bytes, checked against the pin (rule 2); None when there is no file."""
    data = _read(path)
    if data is not None and hashlib.sha256(data).hexdigest() != pin:
        raise PinTextAltered(
            f"{path} does not hash to the pin it is kept under: it was changed after it was"
            f" kept. Remove it to review the {what} without a diff, or pin again."
        )
    return data


def _path(directory: Path, pin: str, suffix: str = ".json") -> Path:
    if not _PIN.fullmatch(pin):
        raise ValueError(f"{pin!r} is not a pin (64 hex digits)")
    return directory / f"{pin}{suffix}"


def _read(path: Path) -> bytes | None:
    """The file's bytes, or None when there is no file. No pinned text is longer than the
    largest listing, so a longer file is read only that far (and then fails its hash)."""
    try:
        with path.open("rb") as f:
            return f.read(MAX_LISTING_BYTES + 1)
    except FileNotFoundError:
        return None


def _holds(path: Path, pin: str) -> bool:
    data = _read(path)
    return data is not None and hashlib.sha256(data).hexdigest() == pin
