"""Calls into the OS keyring, each with a deadline, one at a time across Signoff's processes.

A keyring can block a call for as long as it likes: a locked Secret Service shows an unlock
prompt and answers when somebody deals with it, a daemon that stopped in the middle of a call may
never answer. ``call(fn, timeout)`` runs ``fn`` on a daemon thread and gives up waiting after
``timeout`` seconds with ``KeyringTimeout``. The thread goes on until the keyring answers, so
whatever ``fn`` does must be complete and safe on its own (a compare-before-write under a lock,
never half of one). While a call is still stuck, the next one fails at once rather than piling a
second thread on the same prompt.

Every call Signoff makes into a keyring backend (a read, a write, a deletion), from any of its
processes, is made under one lock (``lock_path``: a file in the user's own cache directory, as
the password database names the home: an MCP host starts a proxy with few variables, and a
tray with its own ``XDG_CACHE_HOME`` would otherwise lock another file): for the Secret Service,
one per session bus, known by its socket, since what the lock protects is the daemon on that
bus (two desktops of one user, or the test suite's workers, each have their own); for any other
backend, one per user. A call
waits for it blocked in the kernel; the caller's deadline bounds the wait, and a write whose
caller gave up meanwhile is not made (it would land after its caller answered, outside the lock
it belonged under: the kept head's, the operator key's). Why every backend and not only the
Secret Service (core/secret_service.py): a backend that keeps its entries in one file rewrites
the whole file on each write (keyrings.alt's truncates it, then writes it again), so a read made
meanwhile by another process found no entry at all, and "no operator key" then made a new key
that no recorded configuration verified under. Backends atomic on their own lose nothing by
being called one at a time: a call takes milliseconds.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from core import private_files, session_bus
from core.errors import KeyringLockRefused, LockRefused, SessionBusRefused
from core.filelock import locked

T = TypeVar("T")

TIMEOUT = 5.0  # seconds: a keyring that answers at all answers within milliseconds


class KeyringTimeout(Exception):
    """The keyring did not answer in time (locked, its prompt up, or gone)."""


_stuck: threading.Thread | None = None
_guard = threading.Lock()
_call = threading.local()  # on a call's own thread: ``given_up``, set once its caller gave up


def given_up() -> bool:
    """Whether the caller of the call running on this thread stopped waiting for it: a write it
    was about to make is then not made (its caller has already answered without it, and may
    have let go of the lock the write belonged under)."""
    event = getattr(_call, "given_up", None)
    return event is not None and event.is_set()


def call(fn: Callable[[], T], timeout: float = TIMEOUT) -> T:
    """``fn()``'s result or exception, or ``KeyringTimeout`` after ``timeout`` seconds."""
    global _stuck
    with _guard:
        if _stuck is not None and _stuck.is_alive():
            raise KeyringTimeout("the keyring has not yet answered an earlier call (locked?)")
        _stuck = None
    box: list[tuple[bool, object]] = []
    gave_up = threading.Event()

    def run() -> None:
        _call.given_up = gave_up
        try:
            box.append((True, fn()))
        except BaseException as e:  # handed to the caller below
            box.append((False, e))

    thread = threading.Thread(target=run, name="signoff-keyring", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        gave_up.set()
        with _guard:
            _stuck = thread
        raise KeyringTimeout(f"the keyring did not answer within {timeout:g} s (locked?)")
    ok, value = box[0]
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]


def lock_path(per_bus: bool = False) -> Path:
    """The file a keyring call of Signoff's is made under (the module's docstring). The Secret
    Service's calls (``per_bus``) are made under the lock of the session bus that reaches it,
    known by what the bus is, not how its address is spelled (``bus_identity``): one lock per
    daemon, the same for every process that reaches that daemon."""
    import hashlib
    import pwd

    home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    folder = private_files.make_dir(home / ".cache" / "signoff")
    bus = bus_identity() if per_bus else None
    if bus is None:
        return folder / "secret-service.lock"
    return folder / f"secret-service-{hashlib.sha256(bus.encode()).hexdigest()[:16]}.lock"


def bus_identity() -> str | None:
    """The session bus of ``DBUS_SESSION_BUS_ADDRESS`` (its first address, as libdbus tries
    first), as what it is: a ``unix:path`` socket by its device and inode (any spelling of the
    path, escaped or through a link, and any ``guid`` added, name the same socket), an abstract
    socket by its name; None when there is none to know (no address, another transport, no
    socket there: the lock of the user then)."""
    from urllib.parse import unquote

    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "").split(";")[0]
    transport, _, params = address.partition(":")
    if transport != "unix":
        return None
    values = dict(p.split("=", 1) for p in params.split(",") if "=" in p)
    if "path" in values:
        try:
            found = os.stat(unquote(values["path"]))
        except (OSError, ValueError):
            return None
        return f"socket:{found.st_dev}:{found.st_ino}"
    if "abstract" in values:
        return f"abstract:{unquote(values['abstract'])}"
    return None


def lock_refused() -> str:
    """What is wrong at the lock's path, in words ("" when nothing is): for the witness's
    alarm, asked when a keyring call failed (core/witness.py rule 5)."""
    from core.errors import UnsafePermissions
    from core.filelock import refused, what_is_at

    for per_bus in (True, False):
        try:
            path = lock_path(per_bus)
        except (OSError, UnsafePermissions) as e:
            return str(e)
        what = what_is_at(path)
        if what:
            return refused(path, what)
    return ""


def one_at_a_time(operation: Callable[[], T], *, writes: bool, per_bus: bool = False) -> T:
    """``operation()`` under the lock (``per_bus``: the Secret Service's, ``lock_path``); a write
    not made at all when its caller gave up while it waited for it. Something else at the lock's
    path (a folder, a link, another user's file) is never waited on: ``KeyringLockRefused``
    says what is there (decision 0067)."""
    from core.errors import UnsafePermissions

    try:
        path = lock_path(per_bus)
    except (OSError, UnsafePermissions) as e:  # the lock's folder itself is not Signoff's
        raise KeyringLockRefused(f"no keyring call can be made: {e}") from None
    try:
        with locked(path, None):
            if writes and given_up():
                raise KeyringTimeout("the keyring call waited too long for another; not made")
            return operation()
    except LockRefused as e:
        raise KeyringLockRefused(f"no keyring call can be made: {e}") from None


class Serialised:
    """A keyring backend whose every call is made under the lock, one at a time."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.per_bus = _is_secret_service(inner)  # the Secret Service's lock, not the user's

    def get_password(self, service: str, username: str) -> str | None:
        read = self.inner.get_password
        return one_at_a_time(lambda: read(service, username), writes=False, per_bus=self.per_bus)  # type: ignore[no-any-return]

    def set_password(self, service: str, username: str, password: str) -> None:
        write = self.inner.set_password
        one_at_a_time(lambda: write(service, username, password), writes=True,
                      per_bus=self.per_bus)  # fmt: skip

    def delete_password(self, service: str, username: str) -> None:
        delete = self.inner.delete_password
        one_at_a_time(lambda: delete(service, username), writes=True, per_bus=self.per_bus)

    def __repr__(self) -> str:
        return f"Serialised({self.inner!r})"


def _is_secret_service(backend: Any) -> bool:
    """Whether ``backend`` is a Secret Service backend (the package's, or one made from it):
    its calls go to the daemon on the session bus, under that bus's lock."""
    try:
        from keyring.backends.SecretService import Keyring as SecretService
    except ImportError:  # pragma: no cover  # the package always has it
        return False
    return isinstance(backend, SecretService)


def find_session_bus() -> None:
    """Where no ``DBUS_SESSION_BUS_ADDRESS`` is set, name the user's session bus at its
    standard place (``$XDG_RUNTIME_DIR/bus``, else ``/run/user/UID/bus``), as libdbus does.

    An MCP host starts ``signoff proxy`` with a few variables of its own (the mcp SDK passes
    only HOME, LOGNAME, PATH, SHELL, TERM and USER), and the Secret Service is reached through
    the session bus: without this the proxy could not read the operator key, and no approval
    could run. Where no bus is there either (a session started by dbus-launch or
    dbus-run-session), the address the tray app left in its run folder, when it is the user's
    own and names a socket no other user can replace (core/session_bus.py, decision 0069).
    Linux only; elsewhere the keyring needs no bus."""
    if not sys.platform.startswith("linux") or os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    socket = Path(runtime) / "bus"
    if socket.is_socket():
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={socket}"
        return
    try:
        address = session_bus.left()
    except SessionBusRefused as e:
        refused = str(e)
        if refused != _refused[0]:  # said once, not at every keyring call
            logging.getLogger("signoff.keyring").warning("%s", e)
        _refused[0] = refused
        return
    if address is not None:
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = address


_refused = [""]  # the last refusal of a left bus address said in the log


def unreachable(backend: Any) -> str:
    """Why no OS keyring can be reached, when ``backend`` (chosen by ``backend()``, nothing
    given) is the package's no-keyring backend because none answered: "no session bus", "the
    Secret Service does not answer"; "" when a keyring answers, or when the operator named no
    keyring (``PYTHON_KEYRING_BACKEND=keyring.backends.fail.Keyring``)."""
    if type(backend).__module__ != "keyring.backends.fail":
        return ""
    if os.environ.get("PYTHON_KEYRING_BACKEND", "").startswith("keyring.backends.fail"):
        return ""
    if not sys.platform.startswith("linux"):
        return "no OS keyring answers"
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return "no session bus"
    return "the Secret Service does not answer"


def is_locked(e: BaseException) -> bool:
    """Whether a keyring call failed because the keyring is locked (or held by its unlock
    prompt past the deadline)."""
    return isinstance(e, KeyringTimeout) or type(e).__name__ in ("LockedException", "KeyringLocked")


# The ``keyring`` package's own backends for each platform's OS keyring: where one answers, it
# is the keyring Signoff uses, whatever the package's configuration file says (decision 0066).
OWN_BACKENDS = {
    "linux": (
        ("keyring.backends.SecretService", "Keyring"),
        ("keyring.backends.kwallet", "DBusKeyring"),
        ("keyring.backends.kwallet", "DBusKeyringKWallet4"),
        ("keyring.backends.libsecret", "Keyring"),
    ),
    "darwin": (("keyring.backends.macOS", "Keyring"),),
    "win32": (("keyring.backends.Windows", "WinVaultKeyring"),),
}


def backend(given: Any = None) -> Any:
    """The keyring backend to use: ``given``, else the one ``PYTHON_KEYRING_BACKEND`` names,
    else the first by priority of the package's own backends for this platform's OS keyring
    that answers, else the one the package's configuration file names in ``default-keyring``
    (read here, decision 0066: its ``keyring-path`` is never put on ``sys.path``), else none
    (``keyring.backends.fail``: a third-party backend installed alone, such as keyrings.alt's
    plaintext file, is used only when the operator names it, decision 0063); each chosen once
    the session bus is named (``find_session_bus``), and chosen again only when the variable or
    the bus changes, or when none answered.

    The configuration file is a file in the user's home that anybody who can write the user's
    files can plant: where the OS keyring answers it is not read at all, so a backend it names
    (a plaintext file holding a key of the planter's) never answers for the operator key or a
    kept head, and a module path it names is never imported. The variable is set by whoever
    starts the process, and is kept as the operator's explicit choice (tests, a headless
    machine); the keyring actually used is recorded in the chain (core/operator_key.py), and a
    process using another one runs nothing approved.

    The package's search over every backend installed is never made (decisions 0038, 0063).
    A chain named is cut to its first of the package's own OS backends (the Secret Service,
    KWallet, macOS, Windows), else none. Every call is made under the lock, one at a time (the
    module's docstring); the Secret Service backend is used in the steady form of
    core/secret_service.py, which several Signoff processes writing at once need."""
    if given is None:
        find_session_bus()
        named = os.environ.get("PYTHON_KEYRING_BACKEND"), os.environ.get("DBUS_SESSION_BUS_ADDRESS")
        given = _chosen.get(named)
        if given is None:
            given = _choose()
            if type(given).__module__ != "keyring.backends.fail":
                _chosen[named] = given  # no keyring yet (a daemon still starting) is asked again
    if type(given).__module__ == "keyring.backends.SecretService":
        from core.secret_service import steady

        return steady(given)  # one at a time too, and steady
    from keyring.backends.fail import Keyring as NoKeyring

    if isinstance(given, NoKeyring | Serialised) or type(given).__module__ == "core.secret_service":
        return given  # nothing to lock, or locked already (a second lock would wait forever)
    return Serialised(given)


def name(chosen: Any) -> str:
    """The keyring a backend is, as the chain records it: its class's full name (the steady
    and the serialised forms named as what they wrap)."""
    inner = chosen.inner if isinstance(chosen, Serialised) else chosen
    kind = type(inner)
    if kind.__module__ == "core.secret_service":
        return "keyring.backends.SecretService.Keyring"
    return f"{kind.__module__}.{kind.__qualname__}"


# The backend chosen, per backend named and session bus: choosing asks the Secret Service on the
# bus (and maybe the configuration file), a few milliseconds on every keyring call.
_chosen: dict[tuple[str | None, str | None], Any] = {}


def _choose() -> Any:
    import keyring.core
    from keyring.backends.fail import Keyring as NoKeyring

    if os.environ.get("PYTHON_KEYRING_BACKEND"):
        return _first_os_keyring_of(keyring.core.load_env())
    own = _own_os_keyring()
    if own is not None:  # the configuration file is not even read (decision 0066)
        return own
    named = configured()
    if named is None:  # none answers and none is named: no keyring (decision 0063)
        return NoKeyring()  # type: ignore[no-untyped-call]
    try:
        return _first_os_keyring_of(keyring.core.load_keyring(named))
    except Exception:  # not installed, or cannot serve here: as the package, no keyring
        return NoKeyring()  # type: ignore[no-untyped-call]


def configured() -> str | None:
    """The backend the ``keyring`` package's configuration file names in ``default-keyring``,
    or None; read as text here, never by the package's ``load_config``, which puts the file's
    ``keyring-path`` first on ``sys.path`` (a planted file would choose the modules every
    Signoff process imports next)."""
    import configparser

    from keyring.util import platform_

    config = configparser.RawConfigParser()
    try:
        config.read(Path(platform_.config_root()) / "keyringrc.cfg", encoding="utf-8")
        text = config.get("backend", "default-keyring").strip()
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    return text or None


def _first_os_keyring_of(named: Any) -> Any:
    """A chain named is cut to its first OS keyring (decision 0024); anything else stands."""
    from keyring.backends.chainer import ChainerBackend
    from keyring.backends.fail import Keyring as NoKeyring

    if not isinstance(named, ChainerBackend):
        return named
    chain = named.backends  # sorted anew (and each backend asked) at every access
    return next(
        (b for b in chain if type(b).__module__.startswith("keyring.backends.")),
        NoKeyring(),  # type: ignore[no-untyped-call]
    )


def _own_os_keyring() -> Any:
    """The first by priority of this platform's own OS keyring backends that answers, or None."""
    platform = "linux" if sys.platform.startswith("linux") else sys.platform
    found = [b for b in (_answering(*own) for own in OWN_BACKENDS.get(platform, ())) if b]
    if not found:
        return None
    _, kind = max(found, key=lambda f: f[0])
    return kind()


def _answering(module_name: str, name: str) -> tuple[float, Any] | None:
    """The backend and its priority, or None where it is not installed or cannot serve."""
    import importlib

    try:
        kind = getattr(importlib.import_module(module_name), name)
        return float(kind.priority), kind  # the package's check: raises where it cannot serve
    except Exception:  # as the package's own ``viable``: any failure means not here
        return None


def describe(e: BaseException) -> str:
    """A keyring failure in words: its message, or its type when it has none."""
    return str(e) or type(e).__name__
