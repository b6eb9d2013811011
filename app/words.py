"""Side-effect classes in plain words: what a window shows where the configuration says
``read_only`` (the name itself stays in tooltips and in the terminal)."""

from __future__ import annotations

import logging

from core.present import CLASS_WORDS
from core.tools import SideEffect

log = logging.getLogger("signoff.app")

WORDS: dict[str, str] = {
    SideEffect.READ_ONLY: "Read-only",
    SideEffect.LOCAL_MUTATION: "Changes this computer",
    SideEffect.REMOTE_MUTATION: "Changes things elsewhere",
    SideEffect.DESTRUCTIVE: "Destructive",
}


def class_words(side_effect: str | None) -> str:
    """The class in a few words; "Not classified" for none, an unknown name as it is."""
    if not side_effect:
        return "Not classified"
    return WORDS.get(side_effect, side_effect)


def class_explanation(side_effect: str | None) -> str:
    """One line saying what a tool of the class does, as a sentence."""
    words = CLASS_WORDS.get(side_effect or "")
    if words is None:
        return "Not classified: the tool is not offered to the host."
    return f"It {words}."


def said(error: Exception) -> str:
    """An error as a window says it: its message, for a person; the error's name (for a bug
    report) goes to the log and may go in a tooltip, never into the window's text."""
    log.info("refused: %s: %s", type(error).__name__, error)
    return str(error)
