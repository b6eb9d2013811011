"""Testing a server's connection without blocking the window.

The server is started by ``signoff servers test NAME --raw --handshake`` in a ``QProcess``: the
window never waits on it, a hung or hostile server is killed at a deadline, and whatever it
prints stays in that process. Its ``initialize`` result (where its instructions are) and then
its raw ``tools/list`` answers come back on stdout and are read here by the same
``read_listing`` the proxy uses, so the pins the operator sees are the proxy's pins.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from core import hosts
from core.errors import SignoffError
from core.proxy.config import ServerConfig
from core.proxy.pins import MAX_LISTING_BYTES, read_listing

_ERROR_NAME = re.compile(r" \[[A-Za-z]+\]$")  # how the CLI ends an error: " [UpstreamStartFailed]"

TIMEOUT_SECONDS = 60.0


def signoff_command() -> list[str]:
    """How to run this Signoff's terminal commands."""
    try:
        return hosts.signoff_command()
    except hosts.HostConfigError:  # not installed as a command: run the module
        return [sys.executable, "-m", "app.launcher"]


class ConnectionTest(QObject):
    """One test of one server: ``listed`` or ``failed`` is emitted once."""

    listed = Signal(str, object, object)  # server name, Listing, its initialize result (a dict)
    failed = Signal(str, str)  # server name, what went wrong, for the operator

    def __init__(
        self,
        name: str,
        server: ServerConfig | None = None,
        *,
        timeout: float = TIMEOUT_SECONDS,
        parent: QObject | None = None,
    ) -> None:
        """Test the configured server ``name``, or ``server``'s command (not saved) as ``name``."""
        super().__init__(parent)
        self.name = name
        self.timeout = timeout
        self.process = QProcess(self)
        self.process.setProcessEnvironment(QProcessEnvironment.systemEnvironment())
        command = signoff_command()
        args = [*command[1:], "servers", "test", name, "--raw", "--handshake",
                "--timeout", str(timeout)]  # fmt: skip
        if server is not None:
            for var in server.env:
                args += ["--env", var]
            args += ["--", server.command, *server.args]
        self.process.setProgram(command[0])
        self.process.setArguments(args)
        self.process.readyReadStandardOutput.connect(self._read)
        self.process.finished.connect(self._finished)
        self.process.errorOccurred.connect(self._error)
        self._out = bytearray()
        self._done = False
        self._deadline = QTimer(self)
        self._deadline.setSingleShot(True)
        self._deadline.timeout.connect(self._too_late)

    def start(self) -> None:
        self._deadline.start(int((self.timeout + 10) * 1000))
        self.process.start()

    def cancel(self) -> None:
        self._fail("cancelled")

    @property
    def running(self) -> bool:
        return not self._done

    def _read(self) -> None:
        self._out += self.process.readAllStandardOutput().data()
        if len(self._out) > MAX_LISTING_BYTES + 65_536:
            self._fail(f"the listing is over {MAX_LISTING_BYTES} bytes; refused")

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        if self._done:
            return
        self._read()
        if status != QProcess.ExitStatus.NormalExit or code != 0:
            err = bytes(self.process.readAllStandardError().data()).decode("utf-8", "replace")
            lines = [line for line in err.splitlines() if line.strip()]
            why = lines[-1].removeprefix("signoff: ") if lines else f"exited with code {code}"
            self._fail(_ERROR_NAME.sub("", why))  # the command's error name is for the terminal
            return
        first, *pages = [line for line in bytes(self._out).split(b"\n") if line.strip()] or [b""]
        try:
            handshake: Any = json.loads(first)
            listing = read_listing(pages)
        except ValueError:
            self._fail("the server's handshake could not be read")
            return
        except SignoffError as e:
            self._fail(str(e))  # the error's name is for the log, not the window
            return
        self._end()
        self.listed.emit(self.name, listing, handshake if isinstance(handshake, dict) else {})

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._fail(f"could not run {self.process.program()}: {self.process.errorString()}")

    def _too_late(self) -> None:
        self._fail(f"no answer within {self.timeout:.0f} s; the server was stopped")

    def _fail(self, why: str) -> None:
        if self._done:
            return
        self._end()
        self.failed.emit(self.name, why)

    def _end(self) -> None:
        self._done = True
        self._deadline.stop()
        if self.process.state() != QProcess.ProcessState.NotRunning:
            self.process.kill()
            self.process.waitForFinished(2000)
