"""A remote server's configuration: its URL, its headers, and where the headers' secrets live.

```toml
[servers.tickets]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${TICKETS_TOKEN}", X-Team = "${keyring:team-id}" }
# [servers.tickets.auth] is reserved for OAuth, which Signoff does not do yet: refused today
```

Rules:

1. A server has a ``command`` or a ``url``, never both. A URL is ``https``, or ``http`` to this
   computer only (localhost, 127.0.0.0/8, ::1): a token sent in clear text across a network
   can be read on the way. It carries no user name or password and no fragment. A query value
   named like a credential (rule 6) is a reference, as a credential header's value is
   (``?api_key=${keyring:NAME}`` or ``${VAR}``); a URL holding one written out is refused. A
   reference stands in a query value only, never in the host or the path.
2. A header's name is an HTTP token, and not one Signoff sets itself (Accept, Content-Type,
   Mcp-Session-Id, MCP-Protocol-Version, Host, ...). Its value is printable text in which
   ``${NAME}`` stands for the environment variable NAME and ``${keyring:NAME}`` for a secret
   Signoff keeps in the OS keyring (``signoff secret set NAME``); any other ``${`` is refused.
3. A header that carries credentials (Authorization, Proxy-Authorization, Cookie, or a name
   with "token", "key", "secret" or "auth" in it) takes them from a reference: a value with
   none would be the secret itself, written into config.toml (and into the configuration
   Signoff records in the chain), and is refused.
4. References are read when the server is started, never stored: a variable or secret that is
   not there, or one holding a line break or a control character, is ``RemoteSecretMissing``,
   named (the header and the reference), and the server is not contacted. No value is ever
   put in a message, a log or the record.
5. ``auth`` is reserved for OAuth (not supported): any value is refused, by name.
6. A query parameter carries credentials when a word of its name (split at ``-``, ``_``, ``.``
   and a lower-to-upper case change, compared in lower case) is one of ``QUERY_WORDS`` or ends
   with one of ``CREDENTIAL_WORDS``' ``token``, ``key``, ``secret`` (``api_key``, ``apiKey``,
   ``X-Amz-Signature``, ``access_token``; not ``keyword`` or ``author``). Its value is read
   at start like a header's (rule 4) and put in the URL as written, with only what cannot
   stand in a query value (a space, ``&``, ``#``, non-ASCII) percent-encoded.
7. ``shown`` is the one way a URL is written anywhere (a message, a log, a status file, a
   window): every credential-named query value that is not only references, and any user name
   or password, is hidden. ``scrubbed`` hides a resolved URL and its secrets' values in a text
   Signoff did not write (an HTTP library's exception); ``ShownInLogs``, on each handler of
   the proxy's and the app's logs, shows every URL of every line (the HTTP library logs each
   request's URL itself).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, unquote_plus, urlsplit

from core.errors import ConfigError, RemoteConfigRefused, RemoteSecretMissing

if TYPE_CHECKING:
    from core.proxy.config import ServerConfig

SERVICE = "signoff"  # the keyring service Signoff keeps its own secrets under
SECRET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
REFERENCE = re.compile(r"\$\{(?:keyring:(?P<secret>[^}]*)|(?P<variable>[^}]*))\}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the transport (core/proxy/http_upstream.py) or by HTTP itself.
RESERVED = frozenset({
    "accept", "content-type", "content-length", "mcp-session-id", "mcp-protocol-version",
    "last-event-id", "host", "connection", "transfer-encoding", "upgrade", "te", "trailer",
    "keep-alive", "proxy-connection", "expect",
})  # fmt: skip
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
CREDENTIAL_WORDS = ("token", "key", "secret", "auth")
# Rule 6: a query parameter's words that carry credentials (besides the endings above).
QUERY_WORDS = frozenset({
    "auth", "authorization", "password", "passwd", "pwd", "pass", "sig", "signature",
    "credential", "credentials", "jwt", "session", "sessionid", "sid",
})  # fmt: skip
_QUERY_ENDINGS = ("token", "key", "secret", "password")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
HIDDEN = "***"
MAX_URL = 2048
MAX_VALUE = 8192


class _Where(Protocol):
    def error(
        self, key: tuple[str, ...], message: str, cls: type[ConfigError] = ConfigError
    ) -> ConfigError: ...


def check_url(url: str) -> str:
    """``url`` if it may be a remote server's address (rule 1), else ``RemoteConfigRefused``;
    no message quotes a credential it carries (rule 7)."""
    said = repr(shown(url)[:200])
    if not url or len(url) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in url):
        raise RemoteConfigRefused(f"{said[:80]} is not a URL (no spaces, at most {MAX_URL})")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise RemoteConfigRefused(f"{said} is not a URL") from None
    if parts.scheme not in ("https", "http") or not host:
        raise RemoteConfigRefused(f"{said}: a remote server's URL is https://HOST/...")
    if parts.username is not None or parts.password is not None:
        raise RemoteConfigRefused(
            f"{parts.scheme}://{host}...: a URL may not carry a user name or password; put"
            " credentials in a header that names a variable or keyring secret"
        )
    if parts.fragment:
        raise RemoteConfigRefused(f"{said}: a URL with a #fragment is not a server's address")
    if parts.scheme == "http" and not is_loopback(host):
        raise RemoteConfigRefused(
            f"{said}: plain http is allowed to this computer only (localhost, 127.0.0.1,"
            " ::1); use https"
        )
    if "${" in url.partition("?")[0]:
        raise RemoteConfigRefused(f"{said}: a ${{...}} reference stands in a query value only")
    for name, value in query(url):
        try:
            found = references(value)
        except RemoteConfigRefused as e:
            raise RemoteConfigRefused(f"{said}: query {name[:64]}: {e}") from None
        if credential_query(name) and (not found or REFERENCE.sub("", value)):
            raise RemoteConfigRefused(
                f"{said}: query {name[:64]} carries credentials: write its value as"
                " ${VARIABLE} or ${keyring:NAME}, never into config.toml"
            )
    return url


def query(url: str) -> list[tuple[str, str]]:
    """The URL's query parameters as written (not decoded), each ``(name, value)``; split at
    ``&`` and at ``;`` (servers that take either do)."""
    text = url.partition("#")[0].partition("?")[2]
    pairs = [pair for pair in re.split("[&;]", text) if pair]
    return [(pair.partition("=")[0], pair.partition("=")[2]) for pair in pairs]


def credential_query(name: str) -> bool:
    """Whether a query parameter of this name carries credentials (rule 6), read as a server
    reads it: percent escapes decoded (``api%5Fkey`` is ``api_key``)."""
    words = [w.lower() for w in _WORD.findall(unquote_plus(name))]
    return any(w in QUERY_WORDS or w.endswith(_QUERY_ENDINGS) for w in words)


def shown(url: str) -> str:
    """``url`` as it may be written anywhere (rule 7): credential-named query values that are not
    only references, and any user name or password, hidden. Never raises."""
    head, hash_, _ = url.partition("#")
    base, question, text = head.partition("?")
    scheme, slashes, rest = base.partition("://")
    if slashes:
        authority, slash, path = rest.partition("/")
        if "@" in authority:
            authority = HIDDEN + "@" + authority.rpartition("@")[2]
        base = scheme + slashes + authority + slash + path
    pairs = []
    for pair in _SEPARATED.split(text):
        name, equals, value = pair.partition("=")
        if equals and credential_query(name) and REFERENCE.sub("", value):
            value = HIDDEN
        pairs.append(name + equals + value)
    return base + question + "".join(pairs) + (hash_ and hash_ + HIDDEN)


_ANY_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


class ShownInLogs(logging.Filter):
    """Every URL of a log line as ``shown`` writes it (rule 7)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        hidden = _ANY_URL.sub(lambda m: shown(m.group()), message)
        for value in sorted(_IN_LOGS, key=len, reverse=True):
            hidden = hidden.replace(value, HIDDEN)
        if hidden != message:
            record.msg, record.args = hidden, None
        return True


def show_urls_in_logs() -> None:
    """``ShownInLogs`` on each handler of the root logger (set up by ``logging.basicConfig``)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ShownInLogs) for f in handler.filters):
            handler.addFilter(ShownInLogs())


def scrubbed(text: str, url: str, values: Iterable[str]) -> str:
    """``text`` (an HTTP library's words) with the resolved ``url`` and each secret's value
    hidden (rule 7)."""
    text = text.replace(url, shown(url))
    for value in sorted(values, key=len, reverse=True):
        if value:
            text = text.replace(value, HIDDEN)
            text = text.replace(quote(value, safe=_AS_WRITTEN), HIDDEN)
    return text


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def references(value: str) -> list[tuple[str, str]]:
    """The references in a header's value, each ``("env", NAME)`` or ``("keyring", NAME)``;
    ``RemoteConfigRefused`` for a ``${`` that is not one (rule 2)."""
    found: list[tuple[str, str]] = []
    for match in REFERENCE.finditer(value):
        secret, variable = match.group("secret"), match.group("variable")
        if secret is not None:
            if not SECRET_NAME.fullmatch(secret):
                raise RemoteConfigRefused(
                    f"${{keyring:{secret[:40]}}}: a secret's name is letters, digits, '.', '-'"
                    " and '_' (at most 64)"
                )
            found.append(("keyring", secret))
        else:
            if not ENV_NAME.fullmatch(variable):
                raise RemoteConfigRefused(
                    f"${{{variable[:40]}}} is not an environment variable's name"
                )
            found.append(("env", variable))
    if "${" in REFERENCE.sub("", value):
        raise RemoteConfigRefused("a '${' that does not close as ${NAME} or ${keyring:NAME}")
    return found


def is_credential_header(name: str) -> bool:
    """Whether a header of this name carries credentials (rule 3)."""
    lowered = name.lower()
    return lowered in CREDENTIAL_HEADERS or any(w in lowered for w in CREDENTIAL_WORDS)


def check_header(name: str, value: str) -> None:
    """Rules 2 and 3: ``RemoteConfigRefused`` naming the header, never quoting its value."""
    if not HEADER_NAME.fullmatch(name):
        raise RemoteConfigRefused(f"{name[:64]!r} is not an HTTP header name")
    lowered = name.lower()
    if lowered in RESERVED:
        raise RemoteConfigRefused(f"header {name}: Signoff sets this header itself")
    if len(value) > MAX_VALUE or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise RemoteConfigRefused(
            f"header {name}: a value is one line of printable text (at most {MAX_VALUE})"
        )
    try:
        found = references(value)
    except RemoteConfigRefused as e:
        raise RemoteConfigRefused(f"header {name}: {e}") from None
    if is_credential_header(name) and not found:
        raise RemoteConfigRefused(
            f"header {name} carries credentials: write them as ${{VARIABLE}} or"
            " ${keyring:NAME}, never into config.toml"
        )


def parse_header(text: str) -> tuple[str, str]:
    """``Name: value`` as given on the command line."""
    name, colon, value = text.partition(":")
    if not colon:
        raise RemoteConfigRefused(f"a header is given as 'Name: value', not {text[:40]!r}")
    name, value = name.strip(), value.strip()
    check_header(name, value)
    return name, value


def read(
    table: Mapping[str, Any], key: tuple[str, ...], where: _Where
) -> tuple[str, dict[str, str]]:
    """A server table's ``url`` and ``headers`` ("" and none for a stdio server), checked by
    rules 1, 2, 3 and 5; config.py's parser hands them here."""
    if "auth" in table:
        raise where.error((*key, "auth"), "OAuth is not supported yet: 'auth' is reserved for it",
                          RemoteConfigRefused)  # fmt: skip
    if "url" not in table:
        if "headers" in table:
            raise where.error((*key, "headers"), "headers are for a server with a url",
                              RemoteConfigRefused)  # fmt: skip
        return "", {}
    url = table["url"]
    if "command" in table or "args" in table or "env" in table:
        raise where.error((*key, "url"), "a server has a command or a url, not both",
                          RemoteConfigRefused)  # fmt: skip
    if not isinstance(url, str):
        raise where.error((*key, "url"), "a URL is a string", RemoteConfigRefused)
    raw = table.get("headers", {})
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
        raise where.error((*key, "headers"), "headers are a table of strings",
                          RemoteConfigRefused)  # fmt: skip
    headers = {str(name): str(value) for name, value in raw.items()}
    try:
        check_url(url)
    except RemoteConfigRefused as e:
        raise where.error((*key, "url"), str(e), RemoteConfigRefused) from None
    seen: set[str] = set()
    for name, value in headers.items():
        try:
            check_header(name, value)
            if name.lower() in seen:
                raise RemoteConfigRefused(f"header {name} is given twice")
        except RemoteConfigRefused as e:
            raise where.error((*key, "headers"), str(e), RemoteConfigRefused) from None
        seen.add(name.lower())
    return url, headers


# --- at start: the references' values (rule 4) ---------------------------------------------


def resolve(
    server: ServerConfig,
    environ: Mapping[str, str] | None = None,
    secret: Callable[[str], str | None] | None = None,
    found: list[str] | None = None,
) -> dict[str, str]:
    """The server's headers with each reference replaced by its value, read now; each value
    read is added to ``found``."""
    return {
        name: _filled(server, f"header {name}", value, environ, secret, found)
        for name, value in server.headers.items()
    }


# A query value's characters kept as written (rule 6): what the host may have written already
# percent-encoded, or meant literally; the rest cannot stand in a query value.
_AS_WRITTEN = "%-._~!$'()*+,;=:@/?"  # '&' and '#' are not: they would end the value


def resolve_url(
    server: ServerConfig,
    environ: Mapping[str, str] | None = None,
    secret: Callable[[str], str | None] | None = None,
    found: list[str] | None = None,
) -> str:
    """The server's URL with each query value's references replaced by their values, read now
    (rule 6); each value read is added to ``found``."""
    base, question, text = server.url.partition("?")
    if not question:
        return server.url
    pairs = []
    for pair in _SEPARATED.split(text):
        name, equals, value = pair.partition("=")
        if not equals:
            pairs.append(pair)  # a separator, or a name with no value
            continue
        filled = _filled(server, f"its URL's query {name}", value, environ, secret, found)
        if filled != value:
            if credential_query(name) or "${keyring:" in value:  # a secret: hidden in logs
                _hidden_in_logs(filled)
            filled = quote(filled, safe=_AS_WRITTEN)
        pairs.append(name + equals + filled)
    return base + question + "".join(pairs)


# Secrets read into a URL (rule 7): a log line quoting the URL as sent shows none of them,
# whatever its parameter's name (``ShownInLogs``).
_IN_LOGS: set[str] = set()
_SEPARATED = re.compile(r"([&;])")
_LEAST_HIDDEN = 4  # characters: shorter values would hide ordinary words of every line


def _hidden_in_logs(value: str) -> None:
    if len(value) >= _LEAST_HIDDEN:
        _IN_LOGS.update((value, quote(value, safe=_AS_WRITTEN), quote(value, safe="")))


def _filled(
    server: ServerConfig,
    what: str,
    value: str,
    environ: Mapping[str, str] | None,
    secret: Callable[[str], str | None] | None,
    found: list[str] | None,
) -> str:
    """``value`` with each reference replaced by its value (rule 4)."""
    source = os.environ if environ is None else environ
    read_secret = keyring_secret if secret is None else secret

    def value_of(match: re.Match[str]) -> str:
        wanted, variable = match.group("secret"), match.group("variable")
        if wanted is not None:
            where = f"the keyring secret {wanted} (signoff secret set {wanted})"
            read = read_secret(wanted)
        else:
            where, read = f"the environment variable {variable}", source.get(variable)
        if read is None or read == "":
            raise RemoteSecretMissing(
                f"server {server.name}: {what} needs {where}, which is not set"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in read):
            raise RemoteSecretMissing(
                f"server {server.name}: {what}: {where} holds a line break or a control"
                " character, which no header or URL may carry"
            )
        if found is not None:
            found.append(read)
        return read

    return REFERENCE.sub(value_of, value)


def _user(name: str) -> str:
    return f"header-secret:{name}"


def keyring_secret(name: str) -> str | None:
    """The secret kept under ``name``, or None; a keyring that cannot be read is named."""
    from core import keyring_calls

    try:
        backend = keyring_calls.backend()
        found = keyring_calls.call(lambda: backend.get_password(SERVICE, _user(name)))
    except Exception as e:  # any keyring failure: the server cannot be given its secret
        raise RemoteSecretMissing(
            f"the keyring secret {name} cannot be read: {keyring_calls.describe(e)}"
        ) from None
    return found if isinstance(found, str) else None


def store_secret(name: str, value: str) -> None:
    """Keep ``value`` under ``name`` in the OS keyring (``signoff secret set``)."""
    from core import keyring_calls

    if not SECRET_NAME.fullmatch(name):
        raise RemoteConfigRefused(
            f"{name[:40]!r}: a secret's name is letters, digits, '.', '-' and '_' (at most 64)"
        )
    if not value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise RemoteConfigRefused(f"secret {name}: one line of printable text, not empty")
    backend = keyring_calls.backend()
    keyring_calls.call(lambda: backend.set_password(SERVICE, _user(name), value))
