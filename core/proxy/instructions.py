"""A server's instructions: pinned like a tool's description, and forwarded to the host only as
pinned. Pure code.

The ``instructions`` of a server's ``initialize`` answer are read by the host's model, as a
tool's description is: a server that rewords them after the operator's review reaches the
model as surely as one that rewords a tool (decision 0031).

Rules:

1. A server's instructions are the ``instructions`` member of its ``initialize`` result, as
   parsed. Absent, null or empty, the server sends none. Any other value that is not a string,
   or a string holding a lone UTF-16 surrogate (which has no UTF-8 form, so no pin), is
   refused: never forwarded, whatever is pinned.
2. Their pin is SHA-256 over the text's UTF-8 bytes (``pin_of``): the host is sent the text,
   not the server's bytes, so two spellings of one text (an escape, say) read the same to the
   model and pin the same. The configuration keeps it as the server's ``instructions_pin``;
   the text is kept in the pins store (core/proxy/pinstore.py), so a change can be shown.
3. They are forwarded only when pinned and unchanged. New (never pinned), changed or refused
   instructions are withheld, whole, and the proxy logs why.
4. With one server (one name), its instructions are forwarded exactly: the same text, nothing
   added. With several, each server's forwarded instructions are a section of their own, in
   the order of the names, headed by ``heading(name)`` on a line of its own, sections apart by
   a blank line; a server forwarding none has no section. None when there is no section.
5. With several servers, instructions holding the words that open a heading
   (``HEADING_START``) are withheld: they could pass for another server's section.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.proxy.config import ServerConfig

log = logging.getLogger("signoff.proxy")

NONE, NEW, PINNED, CHANGED, REFUSED = "none", "new", "pinned", "changed", "refused"
HEADING_START = 'Instructions from MCP server "'

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Instructions:
    """A server's instructions as its handshake gave them, under the pin the operator took."""

    text: str | None  # None: the server sent none, or they were refused
    pin: str | None  # of ``text``
    status: str  # NONE / NEW / PINNED / CHANGED / REFUSED
    reason: str = ""  # why they are withheld ("" when forwarded or none)

    @property
    def forwarded(self) -> bool:
        return self.status == PINNED


def pin_of(text: str) -> str:
    """SHA-256 over the text's UTF-8 bytes (rule 2). ``text`` must have a UTF-8 form."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def heading(name: str) -> str:
    """The line that heads server ``name``'s section when several servers are served."""
    return f'{HEADING_START}{name}" (its tools are offered as {name}__tool):'


def evaluate(handshake: Mapping[str, Any], pinned: str | None) -> Instructions:
    """The instructions of the ``initialize`` result ``handshake``, under the pin ``pinned``
    (None: never pinned)."""
    text = handshake.get("instructions")
    if text is None or text == "":
        return Instructions(None, None, NONE)
    if not isinstance(text, str):
        return Instructions(None, None, REFUSED, f"they are a {type(text).__name__}, not text")
    if _SURROGATE.search(text):
        return Instructions(
            None, None, REFUSED, "they hold a lone UTF-16 surrogate, which has no UTF-8 form"
        )
    pin = pin_of(text)
    if pinned is None:
        return Instructions(text, pin, NEW, "not pinned: review and pin them with `signoff pin`")
    if pinned != pin:
        return Instructions(
            text, pin, CHANGED, "changed since they were pinned: review them with `signoff pin`"
        )
    return Instructions(text, pin, PINNED)


def for_host(
    names: list[str],
    handshakes: Mapping[str, Mapping[str, Any]],
    configured: Mapping[str, ServerConfig],
) -> str | None:
    """The instructions the proxy sends the host for the servers ``names``: ``handshakes``
    holds the ``initialize`` result of each server started, ``configured`` the configuration
    in force. None when there are none to send (rules 3 to 5)."""
    several = len(names) > 1
    sections: list[str] = []
    for name in names:
        handshake = handshakes.get(name)
        server = configured.get(name)
        if handshake is None or server is None:
            continue  # not started: nothing to forward
        got = evaluate(handshake, server.instructions_pin)
        why = got.reason
        if got.forwarded and several and got.text is not None and HEADING_START in got.text:
            why = f"they hold the words {HEADING_START!r}, which head another server's section"
        if why:
            log.warning("instructions of server %s withheld: %s", name, why)
            continue
        if got.text is None:
            continue
        sections.append(f"{heading(name)}\n{got.text}" if several else got.text)
    return "\n\n".join(sections) if sections else None
