"""A host's remote (URL) server entry, read for import as a Signoff remote server
(core/proxy/remote.py), never with a secret copied into Signoff's configuration.

Hosts write a remote server as ``{"url": ..., "headers": {...}}``, with ``"type": "http"``
(VS Code, Claude Code) or ``"streamable-http"``, or none (Cursor). Rules:

1. A Streamable HTTP entry is imported with its URL (refused as core/proxy/remote.py rule 1
   refuses one: https, or http to this computer) and its headers. An SSE entry (``"type":
   "sse"``, the older transport) is skipped: Signoff speaks Streamable HTTP only.
2. A header's value is never copied when it may be a secret. A value that names the host's
   variables, ``${VAR}`` or ``${env:VAR}``, becomes ``${VAR}``: the proxy reads the variable
   when it starts the server, from its own environment. A credential header (core/proxy/
   remote.py rule 3) whose value is written out, or names anything else (``${input:...}``, a
   value VS Code asks the user for), becomes ``${keyring:SERVER-HEADER}``, and the plan says to
   put the value there with ``signoff secret set`` (or to write the header with a variable). A
   header that carries no credentials is copied as it is.
3. A header Signoff refuses (a name it sets itself, a value that is not one line) skips the
   entry, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.errors import RemoteConfigRefused

STREAMABLE = ("http", "streamable-http", "streamableHttp")
_HOST_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Remote:
    url: str
    headers: tuple[tuple[str, str], ...]  # as written into config.toml
    notes: tuple[str, ...]  # what the operator must do before the server can start


def is_remote(spec: dict[str, Any]) -> bool:
    return "url" in spec or spec.get("type", "stdio") != "stdio"


def read(spec: dict[str, Any], name: str) -> Remote | str:
    """The entry as Signoff's remote server ``name``, or why it is skipped (rules 1-3)."""
    from core.proxy import remote

    url, kind, headers = spec.get("url"), spec.get("type", "http"), spec.get("headers") or {}
    if kind == "sse":
        return "an SSE server (the older transport): Signoff speaks Streamable HTTP only"
    if kind not in STREAMABLE or not isinstance(url, str):
        return f"a remote server of type {kind!r} with no URL Signoff can use"
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return "its headers are not an object of strings"
    try:
        remote.check_url(url)
        kept, notes = [], []
        for header, value in headers.items():
            written = _value(name, header, value)
            remote.check_header(header, written)
            if written.startswith("${keyring:"):
                secret = written.removeprefix("${keyring:").removesuffix("}")
                notes.append(
                    f"put its {header} header's value in the keyring: signoff secret set"
                    f" {secret} (or write the header as ${{VARIABLE}} in config.toml)"
                )
            elif _HOST_VARIABLE.search(written):
                names = ", ".join(_HOST_VARIABLE.findall(written))
                notes.append(f"its {header} header reads {names} from the proxy's environment")
            kept.append((header, written))
    except RemoteConfigRefused as e:
        return f"a remote server Signoff cannot take: {e}"
    return Remote(url, tuple(kept), tuple(notes))


def _value(server: str, header: str, value: str) -> str:
    """The header's value for config.toml (rule 2); never the secret itself."""
    from core.proxy import remote

    lowered = header.lower()
    credential = lowered in remote.CREDENTIAL_HEADERS or any(
        word in lowered for word in remote.CREDENTIAL_WORDS
    )
    named = _HOST_VARIABLE.sub(lambda m: "${" + m.group(1) + "}", value)
    if "${" not in value and not credential:
        return value
    if _HOST_VARIABLE.sub("", value).count("${") == 0 and "${" in value:
        return named  # only variables: read by the proxy from its environment
    secret = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{server}-{lowered}")[:64].strip("-.")
    return "${keyring:" + secret + "}"
