"""What a value means: the file, the resource or the recipients a string names, however it is
spelled (decision 0064). One place says it for the rules on arguments (core/policy/rules.py),
the own-files rule (core/policy/own_files.py) and the prompt. Pure code but for one thing: it
asks this machine where symbolic links lead.

Rules:

1. A string is read in a domain: a path, a URI, an e-mail address, or text. A ``Reading`` is
   what it means there: one or more meanings (a value that may mean either of two things has
   both), or a ``doubt`` saying why it cannot be read as one thing.
2. A path: ``~`` expanded as servers expand it (the home of the account they run as), a
   ``file:`` URL taken for the path it names, a relative path joined to the folder it is read
   against (``Where.cwd``, the server's working directory; unknown: doubt), then resolved on
   this machine with ``..`` taken after symbolic links (as the operating system opens it) and
   before them (as a server that folds the text first opens it): both meanings count. A path
   (not a ``file:`` URL's) also means what it names trimmed of white space, decoded, or with
   ``\\`` for ``/``, as some servers (and Windows, trimming) take it: that counts too. Case is
   folded where the file system ignores it. A path holding a control character (escaped too),
   NUL, or longer than ``PATH_MAX``, or naming a file through a process's own view
   (``/proc/self/fd``, ``/proc/self/cwd``, ``/dev/fd``: the server's, not Signoff's) is a
   doubt; ``/proc/self/root`` is the same root for both, and is followed. For a server on
   another machine (``Where.local`` false) nothing of this machine is asked: a path is folded
   as text only, and ``~`` or a relative path is a doubt.
3. A URI, as RFC 3986 section 6 says: scheme and host case-folded, a port that is the
   scheme's default dropped, percent-escapes of unreserved characters decoded and the others
   written in capitals, dot segments removed (escaped ones too, ``%2e%2e``) for the schemes
   whose readers resolve them (``RESOLVING``); a ``file:`` URL with an empty or ``localhost``
   authority, in any slash form, is ``file://`` and the path it names as rule 2 resolves it.
   A host's final dot is dropped. Doubts: an escape that does not decode, a ``file:`` URL
   naming another machine or no absolute path, a scheme Signoff does not know carrying dot
   segments (its server may or may not resolve them), a ``\\`` or an escaped ``/`` or ``\\``
   in the path of a scheme that resolves dot segments (some readers take them for separators;
   in a ``file:`` URL, a ``\\`` spelled or escaped), a ``?`` or ``#`` in a ``file:`` URL
   (``Path.from_uri`` takes them for part of the path).
4. An e-mail address: each address a text holds (``Name <a@x>``, ``a@x, b@y``), lower-cased,
   a quoted local part unquoted (``"a"@x`` is ``a@x``), its domain as IDNA writes it (``x.com``
   for a fullwidth one, as Python's sockets read it). A text with no address, holding an ``@``
   that is in no address it yields, or a domain IDNA cannot write, is a doubt.
5. Text means itself; one holding a ``.`` or ``..`` path segment (spelled, or escaped as
   ``%2e``) is a doubt: read as text, it could still be a path that climbs.
6. ``readings``: everything a string could be taken for by anyone who receives it: the
   spelling; the spelling without control characters, percent-decoded, with ``\\`` for ``/``;
   and the meanings of each of those in every domain it can be read in (doubts aside; a
   ``file:`` URL's path, and the local ``file:`` URL of it, whatever machine it names). What a
   reject rule checks: anything that could be in its set.
7. ``domain_of``: the domain of a literal the operator wrote (a rule's value, folder or the
   fixed start of its pattern): a scheme makes a URI, ``/``, ``~`` or a drive a path, one
   ``@`` between words an address; anything else is text.
8. ``shown``: what a prompt shows beside the spelling: each value that reads as a path (it
   begins with ``/``, ``~``, ``.`` or a drive, or holds a separator and no white space or
   markup character) or a ``file:`` URL, or a URI holding escapes or dot segments, whose
   meaning is not its spelling (a trailing separator aside) or that cannot be read as one
   thing.
"""

from __future__ import annotations

import contextlib
import email.utils
import enum
import os
import posixpath
import re
import sys
import unicodedata
import urllib.parse
from dataclasses import dataclass
from typing import ClassVar

PATH_MAX = 4096
FOLDS_CASE = sys.platform in ("darwin", "win32")  # their usual file systems ignore case
# Schemes whose readers resolve dot segments as RFC 3986 section 5.2.4 says (rule 3).
RESOLVING = frozenset({"file", "http", "https", "ws", "wss", "ftp"})
DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
DRIVE = re.compile(r"^[A-Za-z]:[/\\]")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
DOT_SEGMENT = re.compile(r"(^|[/\\])\.\.?([/\\]|$)")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ESCAPED_DOT = re.compile(r"%2[eE]")
_SEPARATOR_ESCAPE = re.compile(r"%(2[fF]|5[cC])")
_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/?#@]*@")
# A process's own view of files (rule 2): read in Signoff's process, it is not the server's.
_PROCESS_VIEW_DOUBT = ("names a file through a process's own view (its open files or folder),"
                       " which is the server's, not Signoff's")  # fmt: skip
_PROCESS_VIEW = re.compile(
    r"^/(proc/(self|thread-self|\d+)/(fd|cwd|map_files|task)|dev/(fd|std))(/|$)"
)
_ADDRESS = re.compile(r"[^@\s<>,;]+@[^@\s<>,;]+")
_FILE_URL = re.compile(r"^file:", re.IGNORECASE)
_META = frozenset(".^$*+?{}[]|()")
_SEPARATORS = ("/", "\\") if sys.platform == "win32" else ("/",)


class Domain(enum.StrEnum):
    PATH = "path"
    URI = "uri"
    ADDRESS = "address"
    TEXT = "text"


@dataclass(frozen=True)
class Where:
    """Where a value is read: the folder a relative path is read against (the server's
    working directory; None: not known), and whether case is folded (rule 2)."""

    cwd: str | None = None
    folds_case: bool = FOLDS_CASE
    # False for a server on another machine (a remote one): this machine's links and home say
    # nothing of its files, so a path is folded as text only and ``~`` is a doubt (rule 2).
    local: bool = True

    ELSEWHERE: ClassVar[Where]

    @classmethod
    def here(cls) -> Where:
        """This process's working directory, which the servers it starts inherit."""
        try:
            return cls(os.getcwd())
        except OSError:  # the working directory was removed: relative paths name nothing
            return cls(None)


Where.ELSEWHERE = Where(None, folds_case=False, local=False)


@dataclass(frozen=True)
class Reading:
    """What ``spelling`` means in one domain (rule 1)."""

    spelling: str
    meanings: tuple[str, ...] = ()
    doubt: str = ""  # why it cannot be read as one thing; "" when it can

    def words(self) -> str:
        """``resolves to /a`` / ``resolves to /a or /b`` / the doubt, for a prompt."""
        if self.doubt:
            return self.doubt
        return "resolves to " + " or ".join(self.meanings)


def read(text: str, domain: Domain, where: Where) -> Reading:
    """What ``text`` means in ``domain`` (rules 2 to 5)."""
    if domain is Domain.PATH:
        return path(text, where)
    if domain is Domain.URI:
        return uri(text, where)
    if domain is Domain.ADDRESS:
        return address(text)
    if _has_dot_segment(text):
        return Reading(text, (text,), "holds a . or .. segment, and is read as text")
    return Reading(text, (text,))


# --- paths ----------------------------------------------------------------------------------


def path(text: str, where: Where, *, forms: bool = True) -> Reading:
    """Rule 2. ``forms``: the trimmed, decoded and ``\\`` forms count too (a value a server
    receives); not for a value the operator wrote in a rule, which means what it says."""
    if not text or len(text) > PATH_MAX or CONTROL.search(text):
        return Reading(text, (), "is no path Signoff reads (empty, too long or a control"
                                 " character in it)")  # fmt: skip
    local = text
    if _FILE_URL.match(text):
        local, doubt = _file_url_path(text)
        if doubt:
            return Reading(text, (), doubt)
    elif SCHEME.match(text) and not DRIVE.match(text):
        return Reading(text, (), "is a URL of another kind, not a path")
    found: list[str] = []
    for form in [local] if _FILE_URL.match(text) or not forms else path_forms(text):
        if CONTROL.search(form):  # an escaped one
            return Reading(text, (), "is no path Signoff reads (a control character in it)")
        absolute = _absolute(form, where)
        if absolute is None:
            return Reading(text, (), "is a relative path, and the folder it is read against is"
                                     " not known")  # fmt: skip
        resolved = _resolved(absolute, where)
        if any(_PROCESS_VIEW.match(p) for p in (posixpath.normpath(absolute), *resolved)):
            return Reading(text, (), _PROCESS_VIEW_DOUBT)
        found.extend(resolved)
    return Reading(text, tuple(dict.fromkeys(found)))


def path_forms(local: str) -> list[str]:
    """A path as spelled, and as a server that trims it, decodes its escapes or reads a ``\\``
    as a separator takes it (rule 2)."""
    forms = [local, local.strip()]  # and as one that trims white space
    if "%" in local:
        with contextlib.suppress(UnicodeDecodeError):
            forms.append(urllib.parse.unquote(local, errors="strict"))
    forms += [f.replace("\\", "/") for f in forms if "\\" in f]
    return list(dict.fromkeys(forms))


def _absolute(text: str, where: Where) -> str | None:
    if not where.local and text.startswith("~"):
        return None  # whose home? the server's, on its own machine
    text = os.path.expanduser(text)
    if os.path.isabs(text):
        return text
    return None if where.cwd is None else os.path.join(where.cwd, text)


def _resolved(absolute: str, where: Where) -> tuple[str, ...]:
    fold = posixpath.normpath if os.sep == "/" else os.path.normpath
    found: tuple[str, ...] = (
        (_real(absolute), _real(fold(absolute))) if where.local else (fold(absolute),)
    )
    if where.folds_case:  # as written too: a pattern in mixed case is matched against it
        found = (*found, *(p.casefold() for p in found))
    return tuple(dict.fromkeys(found))


def _real(text: str) -> str:
    try:
        return os.path.realpath(text)
    except (OSError, ValueError):  # a loop the non-strict walk gave up on
        return os.path.abspath(text)


def _split(text: str) -> urllib.parse.SplitResult | None:
    """``urlsplit``, or None where it refuses the text (a ``[`` host left open)."""
    try:
        return urllib.parse.urlsplit(text)
    except ValueError:
        return None


def _file_url_path(text: str) -> tuple[str, str]:
    """The local path a ``file:`` URL names, or "" and why it names none (rule 3)."""
    if _BAD_ESCAPE.search(text):
        return "", "holds a % that is no escape"
    if "?" in text or "#" in text:
        return "", "is a file URL holding a ? or #, which some readers take for part of its path"
    parts = _split(text)
    if parts is None:
        return "", "is no URL Signoff can read"
    if parts.netloc.lower() not in ("", "localhost"):
        return "", f"is a file URL naming another machine ({parts.netloc})"
    try:
        local = urllib.parse.unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        return "", "holds escapes that are not UTF-8"
    if not local.startswith("/") or "\0" in local or CONTROL.search(local):
        return "", "is a file URL naming no absolute path"
    if "\\" in local and os.sep == "/":
        return "", "holds a \\, which some readers take for a separator"
    if sys.platform == "win32" and re.match(r"^/[A-Za-z]:", local):
        local = local[1:]
    return local, ""


# --- URIs -----------------------------------------------------------------------------------


def uri(text: str, where: Where) -> Reading:
    """Rule 3."""
    spelled = text
    found = SCHEME.match(text)
    if found is None or DRIVE.match(text):
        return Reading(spelled, (), "is no URI (it has no scheme)")
    if CONTROL.search(text) or _BAD_ESCAPE.search(text):
        return Reading(spelled, (), "holds a control character or a % that is no escape")
    scheme = found[1].lower()
    if scheme == "file":
        local, doubt = _file_url_path(text)
        if doubt:
            return Reading(spelled, (), doubt)
        meanings = _resolved(local, where)
        return Reading(spelled, tuple(file_url(m) for m in meanings))
    resolves = scheme in RESOLVING
    if resolves:  # as WHATWG reads a special scheme: "https:/x" and "https:x" are "https://x"
        text = f"{scheme}://" + text[len(scheme) + 1 :].lstrip("/\\")
    parts = _split(text)
    if parts is None:
        return Reading(spelled, (), "is no URL Signoff can read")
    netloc = (
        _netloc(scheme, parts.netloc) if parts.netloc or "//" in text[: len(scheme) + 3] else ""
    )
    if netloc is None:
        return Reading(spelled, (), "has a host or port Signoff cannot read")
    if resolves and "@" in netloc:
        meant = _join(scheme, netloc, _escapes(parts.path), parts, text)
        return Reading(spelled, (meant,), "holds a name before its host, which a reader may"
                                          " take for the host")  # fmt: skip
    path_part = _escapes(parts.path)
    if resolves and ("\\" in path_part or _SEPARATOR_ESCAPE.search(path_part)):
        return Reading(spelled, (_join(scheme, netloc, path_part, parts, text),),
                       "holds a \\ or an escaped / or \\, which some readers take for a"
                       " separator")  # fmt: skip
    if not resolves and _has_dot_segment(path_part):
        return Reading(spelled, (_join(scheme, netloc, path_part, parts, text),),
                       f"holds . or .. segments, and whether the server of {scheme}: URIs"
                       " resolves them is not known")  # fmt: skip
    if resolves:
        path_part = remove_dot_segments(path_part)
        if netloc and not path_part:
            path_part = "/"
    return Reading(spelled, (_join(scheme, netloc, path_part, parts, text),))


def file_url(local: str) -> str:
    """The ``file:`` URL of an absolute local path, escaped as RFC 3986 needs and no more."""
    return "file://" + urllib.parse.quote(local.replace(os.sep, "/"), safe="/!$&'()*+,;=:@~")


def _join(scheme: str, netloc: str, path_part: str, parts: urllib.parse.SplitResult,
          text: str) -> str:  # fmt: skip
    out = f"{scheme}:"
    if netloc or text[len(scheme) + 1 :].startswith("//"):
        out += "//" + netloc
    out += path_part
    if "?" in text:
        out += "?" + _escapes(parts.query)
    if "#" in text:
        out += "#" + _escapes(parts.fragment)
    return out


def _netloc(scheme: str, netloc: str) -> str | None:
    """The authority as RFC 3986 and IDNA write it: host case-folded, IDNA, its final dot
    dropped, the port a number and gone when the scheme's default; None: not readable."""
    user, at, host = netloc.rpartition("@")
    host = _escapes(host)
    name, colon, port = host.rpartition(":")
    if not colon or "]" in port:
        name, port = host, ""
    if port and not port.isdigit():
        return None
    port = str(int(port)) if port else ""
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    name = name.lower().rstrip(".") if not name.startswith("[") else name.lower()
    if port == DEFAULT_PORTS.get(scheme):
        port = ""
    return f"{_escapes(user)}{at}{name}" + (f":{port}" if port else "")


def _escapes(text: str) -> str:
    """Percent-escapes normalized: an unreserved character decoded, any other in capitals."""

    def one(found: re.Match[str]) -> str:
        char = chr(int(found[1], 16))
        return char if char in UNRESERVED else "%" + found[1].upper()

    return _ESCAPE.sub(one, text)


def remove_dot_segments(path_part: str) -> str:
    """RFC 3986 section 5.2.4."""
    out: list[str] = []
    text = path_part
    while text:
        if text.startswith("../"):
            text = text[3:]
        elif text.startswith("./") or text.startswith("/./"):
            text = text[2:]
        elif text == "/.":
            text = "/"
        elif text.startswith("/../"):
            text = text[3:]
            if out:
                out.pop()
        elif text == "/..":
            text = "/"
            if out:
                out.pop()
        elif text in (".", ".."):
            text = ""
        else:
            cut = text.find("/", 1)
            cut = len(text) if cut == -1 else cut
            out.append(text[:cut])
            text = text[cut:]
    return "".join(out)


# --- addresses and text ---------------------------------------------------------------------


def address(text: str) -> Reading:
    """Rule 4."""
    if CONTROL.search(text):
        return Reading(text, (), "holds a control character")
    found = [addr.strip().lower().rstrip(".") for _, addr in email.utils.getaddresses([text])]
    found = [_canonical(a) for a in found if a]
    if not found or any(_ADDRESS.fullmatch(a) is None for a in found):
        return Reading(text, (), "is no e-mail address Signoff can read")
    if text.count("@") != len(found):
        return Reading(text, tuple(found), "holds an @ that is in no address it yields")
    return Reading(text, tuple(dict.fromkeys(found)))


def _canonical(address: str) -> str:
    """``address`` with a quoted local part unquoted and its domain as IDNA writes it; "" when
    IDNA cannot write it (rule 4)."""
    local, at, domain = address.rpartition("@")
    if len(local) > 1 and local[0] == local[-1] == '"':  # "a"@x is a@x (RFC 5321)
        local = re.sub(r"\\(.)", r"\1", local[1:-1])
    if at and not domain.isascii():
        try:
            domain = domain.encode("idna").decode("ascii")
        except UnicodeError:
            return ""
    return f"{local}{at}{domain}"


def _has_dot_segment(text: str) -> bool:
    return bool(DOT_SEGMENT.search(text) or DOT_SEGMENT.search(_ESCAPED_DOT.sub(".", text)))


# --- everything a string could be taken for (rule 6) ----------------------------------------


def readings(text: str, where: Where) -> tuple[str, ...]:
    """The spelling and everything else ``text`` could be taken for (rule 6), in order."""
    plain = CONTROL.sub("", text)
    bases = [text, plain]
    if "%" in plain:
        with contextlib.suppress(UnicodeDecodeError):
            bases.append(urllib.parse.unquote(plain, errors="strict"))
    if "\\" in plain:
        bases.append(plain.replace("\\", "/"))
    found = list(bases)
    for base in dict.fromkeys(bases):
        if SCHEME.match(base) and not DRIVE.match(base):
            meant = uri(base, where).meanings
            found.extend(meant)  # and the host alone, a name before it dropped
            found.extend(_USERINFO.sub(r"\1", m) for m in meant if _USERINFO.match(m))
            if _FILE_URL.match(base):  # whatever machine it names: a reader may ignore it
                split = _split(base)
                local = urllib.parse.unquote(split.path) if split is not None else ""
                named = path(local, where).meanings if local.startswith("/") else ()
                found.extend((*named, *map(file_url, named)))
            else:  # as a reader that does not know the scheme may take it: dots resolved
                found.append(remove_dot_segments(_escapes(base)))
        else:
            found.extend(path(base, where).meanings)
            found.extend(_lexical(base, where))
        if "@" in base:
            found.extend(_address_readings(base))
    stripped = text.strip(" \t\n\r\f\v\x00")
    if stripped != text and SCHEME.match(stripped):  # readers strip it from a URL
        found.extend(readings(stripped, where))
    return tuple(dict.fromkeys(found))


def _lexical(text: str, where: Where) -> tuple[str, ...]:
    """A path folded as text, its links not followed (``a/link/../b`` is ``a/b``)."""
    if not text or len(text) > PATH_MAX or "\0" in text:
        return ()
    absolute = _absolute(text, where)
    return () if absolute is None else (posixpath.normpath(absolute),)


def _address_readings(text: str) -> tuple[str, ...]:
    """The addresses a text (or a ``mailto:`` URI) holds, each also as a provider delivers it:
    its ``+tag`` dropped, its local part in NFKC (rule 6)."""
    if text[:7].lower() == "mailto:":
        text = urllib.parse.unquote(text[7:].split("?", 1)[0])
    found: list[str] = []
    for each in address(text).meanings:
        local, _, domain = each.rpartition("@")
        plain = unicodedata.normalize("NFKC", local).lower()
        found += [each, f"{plain}@{domain}", f"{plain.split('+', 1)[0]}@{domain}"]
    return tuple(found)


# --- what a person is shown (rule 8) ---------------------------------------------------------

MOST_SHOWN = 20  # values whose meaning a prompt shows; past it, the first are enough to stop one
MOST_LOOKED = 1000  # strings looked at for it: a request of a million paths is not walked


def shown(arguments: object, where: Where) -> tuple[Reading, ...]:
    """Rule 8: the values of ``arguments`` (at any depth) that read as a path or a URI and
    mean something other than they say, or cannot be read as one thing; at most ``MOST_SHOWN``."""
    found: list[Reading] = []
    stack = [arguments]
    looked = 0
    while stack and len(found) < MOST_SHOWN and looked < MOST_LOOKED:
        item = stack.pop()
        if isinstance(item, str):
            looked += 1
            reading = _shown(item, where)
            if reading is not None:
                found.append(reading)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return tuple(dict.fromkeys(found))


def _shown(text: str, where: Where) -> Reading | None:
    if not text or len(text) > PATH_MAX or CONTROL.search(text):
        return None
    if _FILE_URL.match(text):
        reading = path(text, where)
    elif SCHEME.match(text) and not DRIVE.match(text):
        if "%" not in text and not _has_dot_segment(text):
            return None
        reading = uri(text, where)
    elif (
        text.startswith(("/", "~", ".", *_SEPARATORS))
        or DRIVE.match(text)
        or (
            any(s in text for s in _SEPARATORS)
            and not any(c.isspace() or c in '<>"|' for c in text)
        )
    ):
        reading = path(text, where)
    else:
        return None
    plain = text.rstrip("".join(_SEPARATORS)) or text
    same = (plain.casefold(),) if where.folds_case else (plain,)
    if not reading.doubt and reading.meanings in ((text,), same):
        return None
    return reading


# --- the domain of what the operator wrote (rule 7) -----------------------------------------


def domain_of(literal: str) -> Domain:
    if DRIVE.match(literal) or literal.startswith(("/", "~", "\\\\")):
        return Domain.PATH
    if SCHEME.match(literal):
        return Domain.URI
    if _ADDRESS.fullmatch(literal.strip()):
        return Domain.ADDRESS
    return Domain.TEXT


def pattern_start(regex: str) -> str | None:
    """The fixed text a pattern anchored with ``^`` begins with (escapes undone), or None."""
    if not regex.startswith("^"):
        return None
    out: list[str] = []
    index = 1
    while index < len(regex):
        char = regex[index]
        if char == "\\" and index + 1 < len(regex) and not regex[index + 1].isalnum():
            out.append(regex[index + 1])
            index += 2
            continue
        if char == "\\" or char in _META:
            if char in "*?{" and out:  # the character before may be absent
                out.pop()
            break
        out.append(char)
        index += 1
    return "".join(out)
