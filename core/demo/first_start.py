"""The app's first start offers the demo, once (the app runs it: app/demo.py).

It is offered when nothing is set up yet (the configuration names no server and the database
holds no run) and it was not offered before; offering it leaves a file in the data directory,
so it is offered once. A configuration that cannot be read is not "nothing set up": no offer.
"""

from __future__ import annotations

from pathlib import Path

from core import private_files
from core.errors import SignoffError
from core.proxy import config as configuration
from core.store import Store

OFFERED_FILE = "demo-offered"
TITLE = "Welcome to Signoff"
MESSAGE = (
    "Nothing is set up yet. To see Signoff at work in two minutes, try the demo: a small notes"
    " server and an agent, in a home of their own; your own set-up stays as it is."
)
BUTTON = "Try the demo"  # the notification's button, where the notification service has buttons
CLICK = " Click here to start it, or choose Try the demo in Signoff's menu."  # the balloon's
STARTED = (
    "The demo's agent reads, writes a note and deletes one: its requests open here for you to"
    " decide. Its record then shows in a history window of its own."
)


def should_offer(store: Store, config_path: Path, data_dir: Path) -> bool:
    if (data_dir / OFFERED_FILE).exists():
        return False
    try:
        if configuration.load(config_path).servers:
            return False
    except SignoffError:
        return False
    with store.snapshot() as conn:
        return conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is None


def remember_offered(data_dir: Path) -> None:
    private_files.write_text(
        data_dir / OFFERED_FILE, "signoff demo was offered on the first start\n"
    )
