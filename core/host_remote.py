"""A host's remote (URL) server entry, read for import as a Signoff remote server
(core/proxy/remote.py), never with a secret copied into Signoff's configuration.

Hosts write a remote server as ``{"url": ..., "headers": {...}}``, with ``"type": "http"``
(VS Code, Claude Code) or ``"streamable-http"``, or none (Cursor). Rules:

1. A Streamable HTTP entry is imported with its URL (refused as core/proxy/remote.py rule 1
   refuses one: https, or http to this computer) and its headers. An SSE entry (``"type":
   "sse"``, the older transport) is skipped: Signoff speaks Streamable HTTP only.
2. A header's value, and a query value of the URL named like a credential (core/proxy/remote.py
   rule 6), is never copied when it may be a secret. A value that names the host's variables,
   ``${VAR}`` or ``${env:VAR}``, becomes ``${VAR}``: the proxy reads the variable when it
   starts the server, from its own environment. A credential (core/proxy/remote.py rules 3
   and 6) written out becomes ``${keyring:SERVER-NAME}`` (NAME the header's or the query
   parameter's), and the value written out is moved: ``secrets`` carries it to
   core/hosts.py's ``apply_import``, which keeps it in the OS keyring (as ``signoff secret set``
   does) before config.toml is written. One that names anything else (``${input:...}``, a
   value VS Code asks the user for) becomes the same reference, and the plan says to put the
   value there with ``signoff secret set``. A header or a query value that carries no
   credentials is copied as it is.
3. A header Signoff refuses (a name it sets itself, a value that is not one line) skips the
   entry, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from core.errors import RemoteConfigRefused

STREAMABLE = ("http", "streamable-http", "streamableHttp")
_HOST_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Remote:
    url: str
    headers: tuple[tuple[str, str], ...]  # as written into config.toml
    notes: tuple[str, ...]  # what the operator must do before the server can start
    # (keyring name, value): the values written out, moved to the keyring at import; never shown
    secrets: tuple[tuple[str, str], ...] = field(default=(), repr=False)


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
    moved: dict[str, str] = {}
    try:
        url, notes = _url(name, url, moved)
        remote.check_url(url)
        kept = []
        for header, value in headers.items():
            written = _value(name, header, value, remote.is_credential_header(header))
            remote.check_header(header, written)
            notes.extend(_said(f"its {header} header", value, written, moved))
            kept.append((header, written))
    except RemoteConfigRefused as e:
        return f"a remote server Signoff cannot take: {e}"
    return Remote(url, tuple(kept), tuple(notes), tuple(moved.items()))


def _url(server: str, url: str, moved: dict[str, str]) -> tuple[str, list[str]]:
    """The URL for config.toml, each credential-named query value a reference (rule 2)."""
    from core.proxy import remote

    base, question, text = url.partition("?")
    if not question or "#" in text:
        return url, []  # no query, or one check_url refuses with its fragment
    pairs, notes = [], []
    for pair in text.split("&"):
        query, equals, value = pair.partition("=")
        if equals and remote.credential_query(query):
            written = _value(server, query, value, credential=True)
            notes.extend(_said(f"its URL's {query}", value, written, moved))
            value = written
        pairs.append(query + equals + value)
    return base + question + "&".join(pairs), notes


def _said(what: str, value: str, written: str, moved: dict[str, str]) -> list[str]:
    """What becomes of ``value``, written as ``written``: moved to the keyring (``moved``
    gains it), or to be put there, or read from the proxy's environment."""
    if written.startswith("${keyring:"):
        secret = written.removeprefix("${keyring:").removesuffix("}")
        if "${" not in value:
            moved[secret] = value
            return [f"{what} is moved to the OS keyring as secret {secret}"]
        return [
            f"put the value of {what} in the keyring: signoff secret set {secret} (or write"
            " it as ${VARIABLE} in config.toml)"
        ]
    if _HOST_VARIABLE.search(written):
        names = ", ".join(_HOST_VARIABLE.findall(written))
        return [f"{what} reads {names} from the proxy's environment"]
    return []


def _value(server: str, name: str, value: str, credential: bool) -> str:
    """A header's or query value for config.toml (rule 2); never the secret itself."""
    named = _HOST_VARIABLE.sub(lambda m: "${" + m.group(1) + "}", value)
    if "${" not in value and not credential:
        return value
    if _HOST_VARIABLE.sub("", value).count("${") == 0 and "${" in value:
        return named  # only variables: read by the proxy from its environment
    secret = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{server}-{name.lower()}")[:64].strip("-.")
    return "${keyring:" + secret + "}"
