"""Signoff's own files: whether a request names a path in Signoff's own folders. Pure code,
no Qt; it reads the file system only to follow symbolic links (decision 0028).

Rules:

1. Signoff's folders are the database's folder, ``config.toml``'s folder (the pinned texts are
   kept in it, ``pins``), the folders ``core.paths`` names (``SIGNOFF_HOME``), and the
   platform's own data, configuration and runtime folders for Signoff whatever the home in use
   (``core.paths.platform_dirs``), and the folders of its sockets, the fallbacks a deep home's
   sockets go to included (``core.wake.socket_folders``, decision 0074); each is resolved,
   symbolic links followed, when asked.
   What Signoff's trust rests on counts too (``trusted``): the ``keyring`` package's
   configuration folder (where it says and ``~/.config/python_keyring`` whatever XDG says),
   Signoff's cache folder (the keyring lock, core/keyring_calls.py), Signoff's installation
   (its packages' folders, the virtual environment running it, and the interpreter's folders
   on ``sys.path`` where the user can write them), and, as single files, the hosts'
   configuration files holding an entry that launches ``signoff proxy`` (each host's
   user-level file, and its project file in the working directory) and every file Signoff's
   record of its writes names (``hosts wire --file``). A file counts as itself only: its
   folder (``~/.claude.json``'s is the whole home) does not.
2. Every string in the arguments, at any depth (an object's keys too), is read as a path: the
   whole string, and each word of it (split at white space, quotes and ``; | & < > ( )``, and
   after the first ``=``, as in ``--db=PATH``). A ``file:`` URL is read as its path,
   percent-decoded, whatever its authority and slashes (``file:/p``, ``file://localhost/p``,
   ``FILE:///p``), with or without what follows a ``?`` or ``#``; any other ``scheme:``
   word is not a path. Each word is also read as a server that trims it, decodes its escapes
   or reads ``\\`` as ``/`` takes it (``core.policy.meaning.path_forms``). ``~`` is expanded
   and ``\\`` read as ``/`` as ``core.present`` reads a path (``present.expand``).
3. A path resolves into a folder when it is the folder or inside it, with symbolic links
   followed and each ``..`` taken after them (as the operating system takes it), or taken
   first, on the text (as a server that folds the text before it opens the path does):
   either way counts. For a mutating call, a whole argument (in any of its forms) naming a
   folder above one of Signoff's counts too (moving ``~/.config``, or ``.config`` from the
   home, takes Signoff's configuration along) when it reads as a folder's path: absolute,
   holding a separator, or a hidden name; not ``.``, ``..`` or a bare word (``home`` from a
   server started in ``/``), nor a word inside a longer text (prose is not a path).
4. A relative path is read against the working directory the server starts in, when known
   (the proxy's, which its servers inherit); when it is not known a relative path names
   nothing. Text longer than ``PATH_MAX`` characters, or holding NUL, names no path.
5. ``apply`` turns a policy's allow or approval of such a request into an approval of kind
   ``own_files`` naming the paths as they resolve; a deny or an abort stands. The proxy applies
   it to every call (core/proxy/server.py); ``OwnFilesRule`` puts it in front of any policy.
6. This marks what a request names, plainly: a shell command can reach any file under another
   name (``$HOME``, a glob, a script it writes first). Nothing here is a sandbox.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import canonical, hosts, paths, present, wake
from core.policy import meaning
from core.policy.policy import (
    OWN_FILES_KIND,
    Outcome,
    Policy,
    PolicyDecision,
    PolicyRequest,
    identity_of,
)
from core.tools import SideEffect

PATH_MAX = meaning.PATH_MAX
MOST_NAMED = 5  # paths named in the reason; the rest are counted
# Words: split at white space, quotes, shell operators, commas, and (but on Windows, where it
# follows a drive letter) the path-list separator ':'.
_WORDS = re.compile(
    r"""[^\s'"`;|&<>(),]+""" if sys.platform == "win32" else r"""[^\s'"`;|&<>(),:]+"""
)
MOST_CHECKED = 10_000  # distinct paths looked at in one request; past it, the request waits
TOO_MANY = "(more paths than Signoff checks in one request)"
_SCHEME, _DRIVE, _FOLDS_CASE = meaning.SCHEME, meaning.DRIVE, meaning.FOLDS_CASE
_FILE_URL = re.compile(r"^file:(?://[^/]*)?(/.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class OwnFiles:
    """Signoff's folders (rule 1) and the working directory relative paths are read against."""

    folders: tuple[Path, ...]
    cwd: Path | None = None
    files: tuple[Path, ...] = ()  # single files: each itself, never its folder (rule 1)

    @classmethod
    def of(
        cls,
        database: Path | None = None,
        config: Path | None = None,
        *,
        cwd: Path | None = None,
        more: Iterable[Path] = (),
    ) -> OwnFiles:
        """The folders of the database at ``database`` and the configuration at ``config``
        (the ones ``core.paths`` names when not given), with the platform's (rule 1)."""
        database = database if database is not None else paths.database_path()
        config = config if config is not None else paths.config_path()
        found = [database.parent, config.parent, config.parent / "pins", paths.data_dir(),
                 paths.config_dir(), *paths.platform_dirs(), *wake.socket_folders(),
                 *trusted_folders(), *more]  # fmt: skip
        return cls(tuple(dict.fromkeys(found)), cwd, tuple(hosts.wired_files(config, cwd)))

    def touched(self, arguments: Any, *, mutating: bool = False) -> tuple[str, ...]:
        """The paths named in ``arguments`` that resolve into Signoff's folders (or, for a
        mutating call, that hold one: moving or deleting ``~/.config`` takes Signoff's
        configuration with it), as they resolve, sorted; none when nothing does. A request
        naming more than ``MOST_CHECKED`` paths is not walked to the end: it counts as
        touching them (``TOO_MANY``), so that no request can buy its way past the check."""
        real = {_key(_real(str(f))).rstrip(os.sep) for f in self.folders}
        roots = tuple(r for r in real if r and not _DRIVE.fullmatch(r + "/"))  # never a root
        files = {_key(_real(str(f))) for f in self.files}
        above_files = tuple(files)
        cwd = _real(str(self.cwd)) if self.cwd is not None else None
        found: set[str] = set()
        seen: set[str] = set()
        for text in _strings(arguments):
            wholes = {_path(f) for f in meaning.path_forms(text)} if mutating else set()
            for path in _paths(text):
                if path in seen:
                    continue
                if len(seen) >= MOST_CHECKED:
                    return (*sorted(found), TOO_MANY)
                seen.add(path)
                # A folder above Signoff's only as a whole argument (absolute, after ~, or
                # relative to the server's folder: ".config" from the home): a word of prose
                # ("home" in a sentence, the "/" of "<img/>") is far more often no path at all.
                above = path in wholes and _names_a_folder(path)
                for where in _resolved(path, cwd):
                    key = _key(where)
                    if (
                        _inside(key, roots)
                        or key in files
                        or (above and (_holds(key, roots) or _holds(key, above_files)))
                    ):
                        found.add(where)
        return tuple(sorted(found))


def trusted_folders() -> list[Path]:
    """The folders Signoff's trust rests on beyond its own data and configuration (rule 1)."""
    import pwd

    from keyring.util import platform_

    home = Path(pwd.getpwuid(os.geteuid()).pw_dir)  # as core/keyring_calls.py names the cache
    package = Path(canonical.__file__).parent  # core: its sibling app is the same installation
    found = [Path(platform_.config_root()), home / ".config" / "python_keyring",
             home / ".cache" / "signoff", package, package.parent / "app"]  # fmt: skip
    if sys.prefix != sys.base_prefix:  # a virtual environment: Signoff's own installation
        found.append(Path(sys.prefix))
    # The interpreter's own folders every Signoff process imports from (a sitecustomize.py
    # there runs in each), where the user can write them (a Python installed in the home).
    base = os.path.realpath(sys.base_prefix)
    found += [Path(p) for p in sys.path
              if p and os.path.realpath(p).startswith(base + os.sep) and os.path.isdir(p)
              and os.access(p, os.W_OK)]  # fmt: skip
    return found


def apply(
    own: OwnFiles, decision: PolicyDecision, arguments: Any, *, mutating: bool = False
) -> PolicyDecision:
    """Rule 5: an allow or an approval of a request that touches Signoff's own files becomes
    an approval of kind ``own_files``; anything else stands as the policy answered."""
    if decision.outcome not in (Outcome.ALLOW, Outcome.APPROVE):
        return decision
    touched = own.touched(arguments, mutating=mutating)
    if not touched:
        return decision
    return PolicyDecision(Outcome.APPROVE, reason(touched), kind=OWN_FILES_KIND)


def reason(touched: tuple[str, ...]) -> str:
    """What the approval says: the paths as JSON strings (no path can pass for two)."""
    named = ", ".join(json.dumps(p, ensure_ascii=False) for p in touched[:MOST_NAMED])
    more = len(touched) - MOST_NAMED
    return f"touches Signoff's own files: {named}" + (f" and {more} more" if more > 0 else "")


def behind_own_files_rule(identity: str | None) -> str:
    """The identity ``OwnFilesRule`` records for the policy ``identity`` behind it."""
    return canonical.sha256_hex({"policy": identity, "rule": "own-files"})


class OwnFilesRule:
    """Rule 5 in front of ``inner``, for a library's gate: a request naming Signoff's own files
    waits for the operator, whatever ``inner`` allowed."""

    def __init__(self, inner: Policy, own: OwnFiles | None = None) -> None:
        self.inner = inner
        self.own = own if own is not None else OwnFiles.of(cwd=working_directory())

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        decision = self.inner.evaluate(request)
        mutating = request.side_effect is not SideEffect.READ_ONLY
        return apply(self.own, decision, request.value().get("arguments"), mutating=mutating)

    def identity(self) -> str:
        return behind_own_files_rule(identity_of(self.inner))


def working_directory() -> Path | None:
    """This process's working directory, where the servers it starts start; None when gone."""
    try:
        return Path.cwd()
    except OSError:  # the working directory was removed: relative paths name nothing
        return None


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, object keys included, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, member in item.items():
                yield key
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(item)


def _paths(text: str) -> Iterator[str]:
    """The paths ``text`` may name (rule 2), ``~`` expanded."""
    words = [text] if len(text) <= PATH_MAX else []
    if len(text) > 1 and _WORDS.fullmatch(text) is None:
        words += _WORDS.findall(text)
    for word in words:
        if "=" in word:
            words.append(word.split("=", 1)[1])
        forms = [word] if _FILE_URL.match(word) else meaning.path_forms(word)
        if _FILE_URL.match(word) and ("?" in word or "#" in word):  # read with or without
            forms.append(re.split(r"[?#]", word, maxsplit=1)[0])
        for form in forms:  # as a server that trims, decodes or reads \ as / takes it
            path = _path(form)
            if path is not None:
                yield path


def _names_a_folder(path: str) -> bool:
    """Whether a whole argument reads as a folder's path: absolute (after ``~``), holding a
    separator, or a hidden name (``.config``); never ``.``, ``..`` or a bare word (``home``
    from a server started in ``/`` is far more often a word)."""
    if os.path.isabs(path) or "/" in path or os.sep in path:
        return True
    return path.startswith(".") and path not in (".", "..")


def _path(word: str) -> str | None:
    if not word or len(word) > PATH_MAX or "\0" in word:
        return None
    url = _FILE_URL.match(word)
    if url is not None:
        word = urllib.parse.unquote(url[1])
    elif _SCHEME.match(word) and not _DRIVE.match(word):
        return None
    return present.expand(word) if "\0" not in word else None


def _resolved(path: str, cwd: str | None) -> set[str]:
    """Where ``path`` resolves, ``..`` taken after links and before them (rule 3)."""
    if not os.path.isabs(path):
        if cwd is None:
            return set()
        if "/" not in path and path not in (".", ".."):  # one name: one lstat, not a walk
            joined = os.path.join(cwd, path)
            return {joined if not os.path.islink(joined) else _real(joined)}
        path = os.path.join(cwd, path)
    return {_real(path), _real(posixpath.normpath(path))}


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):  # a loop the non-strict walk gave up on, or NUL
        return os.path.abspath(path)


def _key(path: str) -> str:
    return path.casefold() if _FOLDS_CASE else path


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + os.sep) for root in roots)


def _holds(path: str, roots: tuple[str, ...]) -> bool:
    """Whether ``path`` is a folder above one of ``roots``."""
    base = path.rstrip(os.sep) + os.sep
    return any(root.startswith(base) for root in roots)
