"""One name per hash, wherever a person reads it: the approval's hash is the *request hash*
(64 hex digits), its first 16 digits in fours are its *fingerprint*, and a step's call hash is
only ever shown as the *call hash*. ``signoff pending``, ``signoff approve``, the history
window and what the proxy tells the model all name the same value the same way."""

from __future__ import annotations

import json
from pathlib import Path

from app.history import HistoryWindow
from app.history_model import CALL_HASH_HELP
from core import present
from core.heads import MemoryHeadStore
from core.proxy.answers import pending as _pending
from core.proxy.config import Config
from core.proxy.server import Proxy
from core.store import Store
from tests.app.pending import make_pending
from tests.conftest import run_signoff


def test_every_place_names_the_approvals_hash_the_request_hash_and_shows_the_same_value(
    store: Store, home: Path, qtbot
) -> None:
    approval = make_pending(store)
    request_hash = approval.request_hash
    fingerprint = present.fingerprint(request_hash)
    (call_hash,) = store._conn.execute(
        "SELECT request_hash FROM steps WHERE run_id = ?", (approval.run_id,)
    ).fetchone()
    assert len(request_hash) == len(call_hash) == 64 and call_hash != request_hash

    # signoff pending: the request hash as "hash" (what --hash takes), and its fingerprint.
    listed = run_signoff("pending", home=home)
    assert listed.returncode == 0, listed.stderr
    [waiting] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (waiting["id"], waiting["hash"], waiting["fingerprint"]) == (
        approval.id, request_hash, fingerprint)  # fmt: skip
    assert call_hash not in listed.stdout

    # The history: the approval's request hash, labelled so, with its fingerprint; the step's
    # call hash under its own name, never beside "request hash".
    window = HistoryWindow(store, MemoryHeadStore(), home / "config.toml")
    qtbot.addWidget(window)
    window.show_run(approval.run_id)
    assert window.hash_label.text() == f"Request hash: {request_hash} (fingerprint {fingerprint})"
    assert window.call_hash_label.text() == f"Call hash: {call_hash}"
    detail = window.detail.toPlainText().splitlines()
    assert f"    request hash: {request_hash} (fingerprint {fingerprint})" in detail
    showing_the_call_hash = [line for line in detail if call_hash in line]
    assert showing_the_call_hash == [f"  call hash: {call_hash} ({CALL_HASH_HELP})"]

    # What the model is told, to pass on: the same fingerprint, named as the request's.
    told = _pending("srv/push", approval.id, request_hash)["content"][0]["text"]
    assert f"(request fingerprint {fingerprint})" in told
    proxy = Proxy(Config(), ["srv"], store, log_dir=home / "logs")
    with store.transaction("the request is this host's") as tx:  # signoff_status lists its own
        tx.execute("UPDATE runs SET host = ? WHERE id = ?", (proxy.host.id, approval.run_id))
    assert f"request fingerprint {fingerprint}" in proxy.status()
    for text in (told, proxy.status()):
        assert request_hash[:16] not in text  # only grouped, as a fingerprint
        assert present.fingerprint(call_hash) not in text and call_hash[:16] not in text

    # signoff approve, given the request hash: its answer names the same fingerprint.
    decided = run_signoff("approve", approval.id, "--hash", request_hash, home=home)
    assert decided.returncode == 0, decided.stderr
    assert f"request fingerprint {fingerprint}" in decided.stdout
