"""The keyring is the platform's and cannot be planted; the keyring that holds the operator key
is recorded in the chain; a lock path that is not Signoff's lock file is refused by name
(core/keyring_calls.py, core/operator_key.py rule 6, core/filelock.py; decisions 0066, 0067).

The attacker here writes the user's files (the keyring package's configuration file, a Python
module beside it, the database) but cannot read the Secret Service, which answers throughout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import keyring_calls, operator_key, private_files
from core.approvals import approve
from core.errors import KeyringChanged, KeyringLockRefused
from core.heads import KeyringHeadStore
from core.operator_key import KEYRING_USED, KeyringKeyStore, OperatorKey
from core.store import Store, utc_now
from core.transitions import record_config_change
from core.witness import Witness
from tests.conftest import ROOT, _secret_service_problem, need
from tests.core.gatekit import Calls, make_gate, standard_tools

PLANTED_KEY = b"p" * 32

# A backend the planter wrote: it says where it was imported, and answers the planted key.
PLANTED_MODULE = """
import base64, pathlib
from keyring.backend import KeyringBackend
pathlib.Path({marker!r}).write_text("imported")

class Backend(KeyringBackend):
    priority = 100
    def get_password(self, service, username):
        return base64.b64encode({key!r}).decode()
    def set_password(self, service, username, password):
        pass
    def delete_password(self, service, username):
        pass
"""

# What a Signoff process does with the grant: check it, with the keyring it chooses itself.
CHECK = """
import sys
from core import keyring_calls
from core.operator_key import KeyringKeyStore, OperatorKey
from core.records import read_approval
from core.store import Store
with Store.open(sys.argv[1], create=False) as store, store.snapshot() as conn:
    approval = read_approval(conn, sys.argv[2])
    try:
        OperatorKey(KeyringKeyStore()).check_grant(conn, store.database_id, approval)
        said = "ran"
    except Exception as e:
        said = type(e).__name__
print(keyring_calls.name(keyring_calls.backend()), said, "planted" in sys.modules)
"""


def plant(config_home: Path, marker: Path) -> None:
    """keyringrc.cfg naming the planted module, put on sys.path by ``keyring-path``."""
    modules = config_home / "modules"
    modules.mkdir(parents=True)
    (modules / "planted.py").write_text(PLANTED_MODULE.format(marker=str(marker), key=PLANTED_KEY))
    folder = config_home / "python_keyring"
    folder.mkdir()
    (folder / "keyringrc.cfg").write_text(
        f"[backend]\ndefault-keyring = planted.Backend\nkeyring-path = {modules}\n"
    )


def pending_approval(store: Store, key: OperatorKey) -> str:
    from core.decisions import Decision
    from core.gate import VerdictOutcome

    g = make_gate(store, standard_tools(Calls()), operator=key)
    session = g.begin("r", "goal", None)
    verdict = session.step().propose(Decision.tool_call("write", {"n": 7}))
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None
    return verdict.approval.id


def forge_signed(store: Store, approval_id: str, key: bytes) -> None:
    """``approval.decided`` signed with ``key`` and appended as a file writer can."""
    from core.records import read_approval

    with store.snapshot() as conn:
        approval = read_approval(conn, approval_id)
    assert approval is not None
    at = approval.created_at
    fields = operator_key.decision_fields(store.database_id, approval, status="approved",
                                          by="operator", at=at, reason="")  # fmt: skip
    body = {"approval": approval_id, "status": "approved", "by": "operator", "reason": "",
            "request_hash": approval.request_hash, "key": operator_key.key_id(key),
            "mac": operator_key.mac(key, fields)}  # fmt: skip
    with store.transaction() as tx:
        tx.execute("UPDATE approvals SET status = 'approved', decided_by = 'operator',"
                   " decided_at = created_at WHERE id = ?", (approval_id,))  # fmt: skip
        tx.append_event(kind="approval.decided", payload=body, at=at,
                        run_id=approval.run_id, step=approval.step)  # fmt: skip


@pytest.mark.guarantee("G-KEY-3")
def test_a_planted_keyring_configuration_is_not_used_and_its_module_never_imported(
    home: Path, tmp_path: Path
) -> None:
    """The Secret Service answers and holds this database's key; the keyring package's
    configuration file names a backend of the planter's, from a module its ``keyring-path``
    puts first on ``sys.path``, answering a key of the planter's; a decision signed with that
    key is appended. A Signoff process checking the grant chooses the Secret Service, runs
    nothing, and never imports the planted module (before: it imported it and the grant ran)."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    config_home, marker = tmp_path / "config", tmp_path / "imported.marker"
    plant(config_home, marker)
    real = OperatorKey(KeyringKeyStore())
    with Store.open(home / "signoff.db") as store:
        real.key_for_deciding(store)  # the real key, in the Secret Service
        approval_id = pending_approval(store, real)
        forge_signed(store, approval_id, PLANTED_KEY)
        database = store.path
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(config_home)}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    done = subprocess.run([sys.executable, "-c", CHECK, str(database), approval_id], env=env,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert done.stdout.split() == [
        "keyring.backends.SecretService.Keyring", "DecisionUnauthenticated", "False",
    ], done.stdout + done.stderr  # fmt: skip
    assert not marker.exists(), "the planted module was imported"


@pytest.mark.guarantee("G-KEY-3")
def test_with_no_os_keyring_the_configuration_names_a_backend_but_never_a_module_path(
    tmp_path: Path,
) -> None:
    """No OS keyring answers: the backend the configuration file names is used when it is
    installed (the operator named it, decision 0066), but a module found only through the
    file's ``keyring-path`` is not imported: none is used."""
    config_home, marker = tmp_path / "config", tmp_path / "imported.marker"
    plant(config_home, marker)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(config_home),
           "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'no-bus'}"}  # fmt: skip
    env.pop("PYTHON_KEYRING_BACKEND", None)
    script = "from core import keyring_calls; print(keyring_calls.name(keyring_calls.backend()))"
    chosen = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=60, check=True)  # fmt: skip
    assert chosen.stdout.split() == ["keyring.backends.fail.Keyring"], chosen.stderr
    assert not marker.exists()
    cfg = config_home / "python_keyring" / "keyringrc.cfg"
    cfg.write_text("[backend]\ndefault-keyring = keyrings.alt.file.PlaintextKeyring\n")
    chosen = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=60, check=True)  # fmt: skip
    assert chosen.stdout.split() == ["keyrings.alt.file.PlaintextKeyring"], chosen.stderr


@pytest.mark.guarantee("G-KEY-3")
def test_a_keyring_other_than_the_recorded_one_runs_nothing_until_the_operator_accepts_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first signed decision records the Secret Service in the chain. A process that then
    reaches the operator key through another keyring (here keyrings.alt's file, holding the same
    key: the key is not what is checked) signs nothing and runs no grant, the witness raises
    the alarm, and once the operator accepts the new keyring (a ``keyring.used`` event) both
    work again."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    from keyring.backends import SecretService
    from keyrings.alt.file import PlaintextKeyring

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    real = OperatorKey(KeyringKeyStore(SecretService.Keyring()))  # type: ignore[arg-type]
    other_keys = KeyringKeyStore(PlaintextKeyring())  # type: ignore[arg-type]
    other = OperatorKey(other_keys)
    with Store.open(home / "signoff.db") as store:
        first = pending_approval(store, real)
        approve(store, "r", first, "operator:me", operator=real)
        with store.snapshot() as conn:
            assert operator_key.recorded_keyring(conn) == "keyring.backends.SecretService.Keyring"
            approval = _approval(conn, first)
            real.check_grant(conn, store.database_id, approval)  # runs under the recorded one
        other_keys.save(store.database_id, real.key_for_deciding(store))
        with store.snapshot() as conn, pytest.raises(KeyringChanged):
            other.check_grant(conn, store.database_id, _approval(conn, first))
        with pytest.raises(KeyringChanged):
            other.key_for_signing(store)
        heads = KeyringHeadStore(SecretService.Keyring())  # type: ignore[arg-type]
        alarm = Witness(store, heads, tmp_path / "alarm.json", other_keys).check_all().alarm
        assert alarm.endswith("[KeyringChanged]"), alarm
        assert operator_key.accept_keyring(store, other_keys, by="operator:me") is not None
        with store.snapshot() as conn:
            assert operator_key.recorded_keyring(conn) == "keyrings.alt.file.PlaintextKeyring"
            other.check_grant(conn, store.database_id, _approval(conn, first))
        witness = Witness(store, heads, tmp_path / "alarm.json", other_keys)
        assert witness.acknowledge().alarm == ""


@pytest.mark.guarantee("G-KEY-3")
def test_a_keyring_change_appended_by_a_file_writer_is_an_alarm(home: Path, tmp_path: Path) -> None:
    """A ``keyring.used`` event written into the database names a keyring this process does not
    reach: the witness raises the alarm, and the grant does not run."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    real = OperatorKey(KeyringKeyStore())
    with Store.open(home / "signoff.db") as store:
        first = pending_approval(store, real)
        approve(store, "r", first, "operator:me", operator=real)
        with store.transaction() as tx:
            payload = {"keyring": "planted.Backend", "by": "operator:me"}
            record_config_change(tx, KEYRING_USED, payload, at=utc_now())  # type: ignore[arg-type]
        with store.snapshot() as conn, pytest.raises(KeyringChanged):
            real.check_grant(conn, store.database_id, _approval(conn, first))
        heads = KeyringHeadStore()
        state = Witness(store, heads, tmp_path / "alarm.json", real.keys).check_all()
        assert "planted.Backend" in state.alarm and state.alarm.endswith("[KeyringChanged]")


def _approval(conn: object, approval_id: str) -> object:
    from core.records import read_approval

    found = read_approval(conn, approval_id)  # type: ignore[arg-type]
    assert found is not None
    return found


# --- a lock path that is not Signoff's lock file --------------------------------------------


@pytest.fixture
def lock_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder where the keyring lock file should be. The lock's own place is the user's real
    cache, shared with every other Signoff process of the account: the test plants under a
    private one instead."""
    path = tmp_path / "cache" / "secret-service.lock"
    path.mkdir(parents=True)
    monkeypatch.setattr(keyring_calls, "lock_path", lambda *_: path)
    return path


@pytest.mark.guarantee("G-KEY-3")
def test_a_folder_at_the_keyring_lock_path_is_named_not_waited_on(
    home: Path, tmp_path: Path, lock_folder: Path
) -> None:
    """Before: every keyring call failed with "Is a directory", seen as "the operator key
    cannot be read" (or a bare OSError). Now the decision is refused saying what stands at the
    path and what to do, and the witness raises it as an alarm."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    keys = OperatorKey(KeyringKeyStore())
    with Store.open(home / "signoff.db") as store:
        approval_id = pending_approval(store, OperatorKey(operator_key.MemoryKeyStore()))
        with pytest.raises(KeyringLockRefused, match="is a folder, not Signoff's lock file"):
            approve(store, "r", approval_id, "operator:me", operator=keys)
        state = Witness(store, KeyringHeadStore(), tmp_path / "alarm.json").check_all()
        assert str(lock_folder) in state.alarm and state.alarm.endswith("[KeyringLockRefused]")


@pytest.mark.guarantee("G-KEY-3")
def test_a_file_where_the_lock_folder_should_be_is_named_as_the_lock_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``~/.cache/signoff`` itself a file (or a link, or open to others): the decision says the
    keyring lock is refused, not that the operator key cannot be read."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    cache = tmp_path / "cache" / "signoff"
    cache.parent.mkdir()
    cache.write_text("not a folder")
    monkeypatch.setattr(
        keyring_calls, "lock_path",
        lambda *_: private_files.make_dir(cache) / "secret-service.lock",
    )  # fmt: skip
    keys = OperatorKey(KeyringKeyStore())
    with Store.open(home / "signoff.db") as store:
        approval_id = pending_approval(store, OperatorKey(operator_key.MemoryKeyStore()))
        with pytest.raises(KeyringLockRefused, match=str(cache)):
            approve(store, "r", approval_id, "operator:me", operator=keys)


@pytest.mark.guarantee("G-KEY-3")
def test_signoff_approve_prints_what_stands_at_the_lock_path(home: Path, tmp_path: Path) -> None:
    """``signoff approve`` in a process of its own, the lock's place a folder (a private one,
    set in the process, as the fixture above does): the message names the folder."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    with Store.open(home / "signoff.db") as store:
        approval_id = pending_approval(store, OperatorKey(operator_key.MemoryKeyStore()))
    folder = tmp_path / "cache" / "secret-service.lock"
    folder.mkdir(parents=True)
    script = (
        "import sys; from pathlib import Path; from core import keyring_calls, cli;"
        f" keyring_calls.lock_path = lambda *_: Path({str(folder)!r});"
        " sys.exit(cli.main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIGNOFF_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", script, "approve", approval_id], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0 and f"{folder} is a folder, not Signoff's lock file" in said, said
