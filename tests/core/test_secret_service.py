"""The Secret Service as Signoff's processes share it: one writing while others read, with the
real gnome-keyring (core/secret_service.py)."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from core import keyring_calls
from tests.conftest import ROOT, _secret_service_problem, need

# One process of these per role, each through the backend Signoff's own code uses.
HAMMER = """
import sys
from pathlib import Path
from core import keyring_calls
from core.heads import SERVICE

keyring = keyring_calls.backend()
role, count = sys.argv[1], int(sys.argv[2])
failures = []
for i in range(count):
    try:
        if role == "write":
            keyring.set_password(SERVICE, "test-steady", str(i))
        else:
            value = keyring.get_password(SERVICE, "test-steady")
            assert value is not None and value.isdigit(), value
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
print(len(failures), failures[:3], keyring.get_password(SERVICE, "test-steady"))
sys.exit(1 if failures else 0)
"""


@pytest.mark.guarantee("G-KEY-2")
def test_reads_beside_a_writer_always_answer_and_the_daemon_stays_up() -> None:
    """A writer replacing the kept value 300 times while three readers read it: every read
    answers a value written (never "Item does not exist", which the keyring package answers
    when a read meets the replacement), and no write makes a new keyring (which the package
    does when the daemon's ``default`` alias is missing for a moment, and which gnome-keyring
    answered by exiting, taking the unlocked keyring with it: every later call failed)."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    first = [sys.executable, "-c", HAMMER, "write", "1"]
    subprocess.run(first, env=env, check=True, capture_output=True, timeout=60)
    roles = ["write", "read", "read", "read"]
    hammers = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, role, "300"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for role in roles
    ]
    try:
        said = [h.communicate(timeout=120)[0] for h in hammers]
    finally:
        for h in hammers:
            h.kill()
    assert [h.returncode for h in hammers] == [0, 0, 0, 0], said
    assert said[0].split() == ["0", "[]", "299"]


PLANTED = """
import base64, sys
from keyrings.alt.file import PlaintextKeyring
from core.operator_key import SERVICE, _user
PlaintextKeyring().set_password(SERVICE, _user(sys.argv[1]), base64.b64encode(b"k" * 32).decode())
"""

READ_KEY = """
import sys
from pathlib import Path
from core import keyring_calls
from core.errors import NoKeyringAnswers
from core.operator_key import KeyringKeyStore
try:
    found = KeyringKeyStore().load(sys.argv[1])
except NoKeyringAnswers:  # no OS keyring answered: not "no key" (decision 0069)
    found = "unreachable"
print(type(keyring_calls.backend()).__module__, found)
"""


@pytest.mark.guarantee("G-KEY-1")
def test_a_key_planted_in_a_file_keyring_is_never_read(tmp_path: Path) -> None:
    """With keyrings.alt installed beside the Secret Service, the ``keyring`` package chains the
    two and reads on in the plaintext file when the Secret Service has no value: a key written
    there by anybody who can write the user's files would sign decisions. Signoff uses the OS
    keyring alone."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    database_id = "planted-" + tmp_path.name
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path)}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    subprocess.run([sys.executable, "-c", PLANTED, database_id], env=env, check=True, timeout=60)
    assert list(tmp_path.rglob("keyring_pass.cfg")), "the file keyring was not written"
    read = subprocess.run(
        [sys.executable, "-c", READ_KEY, database_id], env=env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    assert read.stdout.split() == ["core.secret_service", "None"], read.stdout


# A writer moving a kept head while readers read the operator key, all through Signoff's own
# backend over keyrings.alt's file keyring, which rewrites its whole file on each write.
FILE_HAMMER = """
import sys
from core import keyring_calls
from core.operator_key import KeyringKeyStore
from core.heads import SERVICE

role, count = sys.argv[1], int(sys.argv[2])
keys = KeyringKeyStore()
missed = 0
for i in range(count):
    if role == "write":
        keyring_calls.backend().set_password(SERVICE, "db:/test/hammered", str(i) * 40)
    elif keys.load("hammered") is None:
        missed += 1
print(missed)
"""


@pytest.mark.guarantee("G-KEY-2")
def test_reads_beside_a_writer_of_a_file_keyring_never_miss_the_operator_key(
    tmp_path: Path,
) -> None:
    """A file keyring (keyrings.alt's, as a machine without a Secret Service may be set up to
    use) truncates and rewrites its file on every write: a read made meanwhile by another
    process found no operator key, and the next decision then made a new one, under which no
    recorded configuration verified (every call refused). Every keyring call of Signoff's is
    made one at a time, across its processes: no read misses the key."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path),
           "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring"}  # fmt: skip
    script = "import sys; from core.operator_key import KeyringKeyStore;" \
        " KeyringKeyStore().save('hammered', b'k' * 32)"  # fmt: skip
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    hammers = [
        subprocess.Popen([sys.executable, "-c", FILE_HAMMER, role, "400"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for role in ("write", "read", "read")
    ]  # fmt: skip
    try:
        said = [h.communicate(timeout=120)[0] for h in hammers]
    finally:
        for h in hammers:
            h.kill()
    assert [h.returncode for h in hammers] == [0, 0, 0], said
    assert [s.strip() for s in said] == ["0", "0", "0"], said  # misses, per process
    assert list(tmp_path.rglob("keyring_pass.cfg")), "the file keyring was not what was used"


def test_one_connection_and_one_session_serve_a_process_and_a_lost_one_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 4 of core/secret_service.py with the real gnome-keyring: many reads and writes of
    one process open one D-Bus connection and one encrypted session (the package's own backend
    opens both for every call); a connection closed under it, or a session the daemon no longer
    knows (as after the daemon restarted), costs one new connection, never a failed call."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    import secretstorage

    from core import secret_service

    opened = {"connections": 0, "sessions": 0}
    dbus_init, open_session = secretstorage.dbus_init, secretstorage.util.open_session

    def counted_connection() -> object:
        opened["connections"] += 1
        return dbus_init()

    def counted_session(connection: object) -> object:
        opened["sessions"] += 1
        return open_session(connection)  # type: ignore[arg-type]

    monkeypatch.setattr(secretstorage, "dbus_init", counted_connection)
    for module in (secretstorage.util, secretstorage.collection, secretstorage.item):
        monkeypatch.setattr(module, "open_session", counted_session)
    kept = secret_service._Kept()
    monkeypatch.setattr(secret_service, "_kept", kept)
    try:
        _one_connection_and_session(secret_service.Keyring(), kept, opened, "kept-" + tmp_path.name)
    finally:
        kept.drop()


def _one_connection_and_session(keyring: Any, kept: Any, opened: dict[str, int], user: str) -> None:
    for i in range(20):
        keyring.set_password("signoff-tests", user, f"value {i}")
        assert keyring.get_password("signoff-tests", user) == f"value {i}"
    assert opened == {"connections": 1, "sessions": 1}

    kept.bus.close()  # the connection lost under the process
    assert keyring.get_password("signoff-tests", user) == "value 19"
    kept.session.object_path = "/org/freedesktop/secrets/session/gone"
    keyring.set_password("signoff-tests", user, "after")
    assert keyring.get_password("signoff-tests", user) == "after"
    assert opened == {"connections": 3, "sessions": 3}
    keyring.delete_password("signoff-tests", user)
    assert keyring.get_password("signoff-tests", user) is None


CHOSEN = """
import sys
from core import keyring_calls
chosen = keyring_calls.backend()
inner = getattr(chosen, "inner", chosen)
loaded = sorted(m for m in sys.modules if m.startswith(("keyring.backends.", "keyrings.")))
print(type(inner).__module__ + "." + type(inner).__name__, " ".join(loaded))
"""


def _chosen(env: dict[str, str]) -> tuple[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", CHOSEN], env=env, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    chosen, *loaded = done.stdout.split()
    return chosen, loaded


def test_the_os_keyring_is_found_without_loading_every_backend_installed(tmp_path: Path) -> None:
    """Where nothing names a backend, the platform's own OS keyring is chosen, as the package
    would (first of its chain), without loading the other platforms' backends or keyrings.alt's
    (the package's search for them was 0.1-0.2 s of every command that reads the keyring)."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    chosen, loaded = _chosen(env)
    assert chosen == "core.secret_service.Keyring"
    assert [m for m in loaded if m.startswith(("keyrings.", "keyring.backends.macOS"))] == []


def test_a_backend_the_keyrings_configuration_names_is_the_one_used(tmp_path: Path) -> None:
    """``PYTHON_KEYRING_BACKEND`` chooses; the package's configuration file chooses only where
    no OS keyring answers (decision 0066): a person who set up their keyring that way (a
    machine without a Secret Service) keeps it, and a planted file never wins over the OS
    keyring."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    (tmp_path / "python_keyring").mkdir()
    (tmp_path / "python_keyring" / "keyringrc.cfg").write_text(
        "[backend]\ndefault-keyring = keyrings.alt.file.PlaintextKeyring\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    assert _chosen(env)[0] == "core.secret_service.Keyring"
    no_bus = {**env, "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'no-bus'}"}
    assert _chosen(no_bus)[0] == "keyrings.alt.file.PlaintextKeyring"
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    assert _chosen(env)[0] == "keyring.backends.fail.Keyring"


@pytest.mark.guarantee("G-KEY-1")
def test_with_no_os_keyring_a_file_keyring_installed_alone_is_never_read(tmp_path: Path) -> None:
    """No Secret Service on the bus and nothing named: the ``keyring`` package's search would
    choose keyrings.alt's plaintext file, installed alone, and a key planted there by anybody who
    can write the user's files would sign decisions. Signoff uses no keyring at all, without
    making the search (decision 0063); naming the file keyring still chooses it."""
    database_id = "alone-" + tmp_path.name
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path),
           "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'no-bus'}"}  # fmt: skip
    env.pop("PYTHON_KEYRING_BACKEND", None)
    subprocess.run([sys.executable, "-c", PLANTED, database_id], env=env, check=True, timeout=60)
    assert list(tmp_path.rglob("keyring_pass.cfg")), "the file keyring was not written"
    chosen, loaded = _chosen(env)
    assert chosen == "keyring.backends.fail.Keyring"
    assert [m for m in loaded if m.startswith(("keyrings.", "keyring.backends.macOS"))] == []
    read = subprocess.run([sys.executable, "-c", READ_KEY, database_id], env=env,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert read.stdout.split() == ["keyring.backends.fail", "unreachable"], read.stdout
    named = {**env, "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring"}
    read = subprocess.run([sys.executable, "-c", READ_KEY, database_id], env=named,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert read.stdout.split()[-1] not in ("None", "unreachable"), "named, not read"


def test_the_backend_is_chosen_once_per_process_unless_none_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Choosing asks the configuration file and the bus: made once, not on every keyring call;
    a choice of no keyring (a daemon still starting) is made again at the next call."""
    import keyring.core

    from core import keyring_calls

    asked = []
    load_env = keyring.core.load_env
    monkeypatch.setattr(keyring.core, "load_env", lambda: asked.append(1) or load_env())
    monkeypatch.setattr(keyring_calls, "_chosen", {})
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    first = keyring_calls.backend()
    assert [type(keyring_calls.backend().inner) for _ in range(5)] == [type(first.inner)] * 5
    assert len(asked) == 1
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    for _ in range(3):
        keyring_calls.backend()
    assert len(asked) == 4


@pytest.mark.guarantee("G-KEY-2")
def test_one_bus_however_its_address_is_spelled_has_one_lock_and_two_buses_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Secret Service's calls are made one at a time per daemon: every process that reaches
    the same bus takes the same lock, whether its address came from the environment, the
    standard place, a link, or the app's left file; another bus (another desktop, another test
    worker) has its own."""
    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # a socket path holds 107 bytes
        folder = Path(short)
        listening = []
        for name in ("bus", "other"):
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(folder / name))
            listening.append(sock)
        (folder / "link").symlink_to(folder / "bus")
        escaped = "".join(f"%{b:02x}" if chr(b) == "/" else chr(b) for b in str(folder).encode())

        def lock(address: str | None) -> Path:
            if address is None:
                monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
            else:
                monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
            return keyring_calls.lock_path(True)

        try:
            one = lock(f"unix:path={folder}/bus")
            assert one.name != "secret-service.lock"
            for spelled in (f"unix:path={folder}/bus,guid=0123456789abcdef0123456789abcdef",
                            f"unix:path={folder}/link", f"unix:path={escaped}/bus",
                            f"unix:path={folder}/./bus;unix:path={folder}/other"):  # fmt: skip
                assert lock(spelled) == one, spelled
            assert lock(f"unix:path={folder}/other") not in (one, lock(None))
            assert lock("unix:abstract=signoff-x") == lock("unix:abstract=signoff-x,guid=01")
            assert lock("unix:abstract=signoff-x") != lock("unix:abstract=signoff-y")
            per_user = keyring_calls.lock_path(False)
            assert per_user.name == "secret-service.lock" and per_user.parent == one.parent
            for none in (None, "", "tcp:host=localhost,port=1", f"unix:path={folder}/gone"):
                assert lock(none) == per_user, none
        finally:
            for sock in listening:
                sock.close()


def held_locks(locks: dict[bool, Path]) -> list[str]:
    """Which of the locks another process could not take now: "bus", "user"."""
    held = []
    for name, per_bus in (("bus", True), ("user", False)):
        fd = os.open(locks[per_bus], os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(name)
        finally:
            os.close(fd)  # a lock of this descriptor goes with it
    return held


@pytest.mark.guarantee("G-KEY-2")
def test_a_secret_service_backend_takes_its_bus_lock_and_a_file_keyring_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend made from the package's Secret Service one (a test's, a subclass) is called
    under its bus's lock, as the steady backend is; a file keyring under the user's. The two
    locks are private ones here: the user's real lock is every other Signoff process's too."""
    from keyring.backends import SecretService
    from keyrings.alt.file import PlaintextKeyring

    locks = {True: tmp_path / "bus.lock", False: tmp_path / "user.lock"}
    monkeypatch.setattr(keyring_calls, "lock_path", lambda per_bus=False: locks[per_bus])

    class Made(SecretService.Keyring):
        def get_password(self, service: str, username: str) -> str | None:
            return ",".join(held_locks(locks))

    class File(PlaintextKeyring):
        def get_password(self, service: str, username: str) -> str | None:
            return ",".join(held_locks(locks))

    assert keyring_calls.backend(Made()).get_password("s", "u") == "bus"
    assert keyring_calls.backend(File()).get_password("s", "u") == "user"
