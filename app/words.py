"""Plain words for what the windows show: a side-effect class as a person says it.

The configuration, the CLI and the record keep the class's own name (``read_only``); a window
says it in words (``read only``), and may give the name in a tooltip. What a class means, in a
sentence, is ``core.present.CLASS_WORDS``.
"""

from __future__ import annotations

from core.tools import SideEffect

CLASS_NAMES = {
    SideEffect.READ_ONLY: "read only",
    SideEffect.LOCAL_MUTATION: "local change",
    SideEffect.REMOTE_MUTATION: "external change",
    SideEffect.DESTRUCTIVE: "destructive",
}


def class_words(side_effect: SideEffect) -> str:
    """The class as a window says it: ``read only``, ``local change``, ``external change``,
    ``destructive``."""
    return CLASS_NAMES[side_effect]
