"""The witness: keeps the chain's head out of reach of whoever can write the database.

Rules:

1. On start the whole chain is verified against the head kept for this database; after each
   wake-up only the events since the last witnessed head are (the head's own event must still
   carry its hash).
2. A chain that verifies moves the kept head forward, never back (core/anchor.py: proxies also
   anchor it, before each approved side effect).
3. A chain that does not verify is an alarm naming the first bad event. The alarm stays (also
   across restarts: it is kept in a file beside the database) until the operator acknowledges
   it; while it stands, the head is not moved.
4. No keyring: the state is "not anchored" and everything else goes on. A keyring that failed
   is not asked again at each change, only by ``retry`` (the app backs off between retries).
5. Two keyring states are alarms, not "not anchored": something other than Signoff's lock file
   at the keyring lock's path (every keyring call is refused until it is removed, decision
   0067), and a keyring reached that is not the one the chain records as holding the operator
   key (nothing approved runs until the operator confirms it, decision 0066).
6. Another database lying where one was anchored (core/heads.py rule 2) is an alarm
   (``DatabaseReplaced``) until the operator confirms it is theirs (``accept``): the places
   it lies at then record it, and the chain is verified again from the start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core import keyring_calls, private_files
from core.anchor import Anchor, holds
from core.chain import Head
from core.errors import (
    ChainBroken,
    DatabaseRestored,
    HeadUnavailable,
    NotAnchored,
    UnsafePermissions,
)
from core.heads import HeadStore, confirm
from core.operator_key import KeyStore, keyring_problem
from core.store import Store
from core.verify import Anchor as Kept
from core.verify import verify


@dataclass(frozen=True)
class WitnessState:
    anchored: bool
    head: Head | None  # the last event verified
    alarm: str = ""  # what is wrong, naming the first bad event ("" when nothing is)
    alarm_seq: int | None = None
    detail: str = ""  # why not anchored


class Witness:
    def __init__(
        self, store: Store, heads: HeadStore, alarm_file: Path, keys: KeyStore | None = None
    ) -> None:
        self.store = store
        self.heads = heads
        self.keys = keys  # the operator key's keyring, compared with the chain's (rule 5)
        self.alarm_file = alarm_file
        self._last: Head | None = None
        self.state = self.remembered(alarm_file)

    @staticmethod
    def remembered(alarm_file: Path) -> WitnessState:
        """The state before any check: an alarm raised earlier stays until acknowledged. An
        alarm file that is there but cannot be read as one (a folder in its place, another
        user's file, garbage) is an alarm too: whatever put it there may have hidden one."""
        try:
            text = private_files.read_text(alarm_file, "alarm file")
            if text is None:
                return WitnessState(False, None)
            value = json.loads(text)
            return WitnessState(False, None, str(value["alarm"]), int(value["seq"]))
        except (OSError, UnsafePermissions, ValueError, KeyError, TypeError) as e:
            why = str(e) if isinstance(e, UnsafePermissions) else f"{type(e).__name__}: {e}"
            return WitnessState(
                False, None, f"the alarm file cannot be read ({why}) [AlarmFile]", 0
            )

    def check_all(self) -> WitnessState:
        """Verify the whole chain (on start, and on demand)."""
        return self._check(start=None)

    def advance(self) -> WitnessState:
        """Verify what was appended since the last head this witness vouched for; nothing,
        and no keyring call, when nothing was (a wake need not have written anything)."""
        if self._last is not None and self.store.head() == self._last:
            return self.state
        # A keyring that failed is not asked again at every change (a locked one would prompt
        # each time): the chain is verified without it, and ``retry`` asks, on its schedule.
        keyring = self.state.anchored or self._last is None
        return self._check(start=self._last, keyring=keyring)

    def retry(self) -> WitnessState:
        """Try the keyring again (a head not kept yet), whether or not anything was appended."""
        return self._check(start=self._last)

    def acknowledge(self) -> WitnessState:
        """The operator has seen the alarm: forget it, and verify again from the start. One
        whose file cannot be removed (a folder in its place) stays, saying why."""
        try:
            self.alarm_file.unlink(missing_ok=True)
        except OSError as e:
            return self._raise_alarm(
                f"the alarm file {self.alarm_file} cannot be removed ({e}); move it away"
                " [AlarmFile]",
                self.state.alarm_seq or 0,
            )
        self.state = WitnessState(self.state.anchored, self.state.head)
        return self.check_all()

    def accept(self) -> WitnessState:
        """The operator confirms that the database here is theirs (rule 6): anchor it at the
        places it lies at, forget the alarm, verify again. A keyring that cannot be written
        leaves the alarm standing, saying why."""
        try:
            kept = self.heads.load(self.store.database_id)
            if kept is not None:  # accepting never forgives a rollback (as signoff anchor accept)
                holds(self.store, kept)
            confirm(self.heads, self.store.path, self.store.head())
        except HeadUnavailable as e:
            return self._raise_alarm(f"{self.state.alarm} (not confirmed: {e})", 0)
        except DatabaseRestored as e:
            return self._raise_alarm(f"{e} [{type(e).__name__}]", 0)
        return self.acknowledge()

    def _check(self, start: Head | None, keyring: bool = True) -> WitnessState:
        try:
            report = verify(self.store, self.heads if keyring else None, start=start)
        except ChainBroken as e:
            return self._raise_alarm(f"{e} [{type(e).__name__}]", e.seq)
        head = report.head
        anchored, detail = False, report.detail
        if keyring:
            alarm = self._keyring_alarm(report.anchor is Kept.UNAVAILABLE)
            if alarm:
                self._last = head
                return self._raise_alarm(alarm, head.seq if head is not None else 0)
        if not keyring:
            detail = self.state.detail  # still why it is not anchored
        elif report.anchor is Kept.UNAVAILABLE:
            pass  # the keyring just failed: not asked again to keep the head
        elif not self.state.alarm and self.state.anchored and self.state.head == head:
            anchored = True  # kept already: the keyring is written when the head moved only
        elif not self.state.alarm:
            try:
                Anchor(self.heads).advance(self.store, head)  # forward only (core/anchor.py)
                anchored = True
            except NotAnchored as e:
                detail = str(e)
            except DatabaseRestored as e:  # a proxy anchored further since, on another chain
                return self._raise_alarm(f"{e} [DatabaseRestored]", head.seq)
        self._last = head
        self.state = WitnessState(anchored, head, self.state.alarm, self.state.alarm_seq, detail)
        return self.state

    def _keyring_alarm(self, failed: bool) -> str:
        """Rule 5's alarm text, or "": the lock refused (looked at only when the keyring just
        failed), or another keyring than the chain's."""
        if failed:
            refused = keyring_calls.lock_refused()
            if refused:
                return f"no keyring call can be made: {refused} [KeyringLockRefused]"
        if self.keys is None:
            return ""
        try:
            with self.store.snapshot() as conn:
                changed = keyring_problem(conn, self.keys)
        except Exception:  # a keyring that cannot even be chosen: not this alarm
            return ""
        return f"the keyring changed: {changed} [KeyringChanged]" if changed else ""

    def _raise_alarm(self, text: str, seq: int) -> WitnessState:
        """Raise the alarm, and keep it for the next start; one that cannot be kept is raised
        all the same, saying so."""
        try:
            private_files.write_text(self.alarm_file, json.dumps({"alarm": text, "seq": seq}))
        except (OSError, UnsafePermissions) as e:
            text = f"{text} (not kept for the next start: {e})"
        self.state = WitnessState(False, self.state.head, text, seq)
        return self.state
