"""The Secret Service as Signoff's processes share it: one writing while others read, with the
real gnome-keyring (core/secret_service.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, _secret_service_problem, need

# One process of these per role, each through the backend Signoff's own code uses.
HAMMER = """
import sys
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
