"""Danger you can see: each class has its own colour, icon and words, the same in the tray icon,
the notification, the dialog and the history; the tray shows the highest class waiting; a
request that may have run stands out above every class."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QIcon, QImage

from app import danger
from app.dialog import ApprovalDialog
from app.history_model import CLASS, OUTCOME, RunsModel
from app.model import read_pending
from app.notifier import message_of
from app.tray import TrayApp
from core.approvals import reject
from core.operator_key import MemoryKeyStore, OperatorKey
from core.store import Store
from core.tools import SideEffect
from tests.app.pending import CLASSES, OWN_FOLDER, make_pending

CLASS_LOOKS = [danger.class_look(c) for c in SideEffect] + [danger.class_look(None)]
EVERY_LOOK = [*CLASS_LOOKS, danger.MAY_HAVE_RUN_LOOK]
SHAPE = (32, 56)  # a point of every icon inside its shape, below its glyph


def _waiting(store: Store, tool: str, run_id: str) -> None:
    """A request of ``tool``'s class waiting; a read-only one waits because it names Signoff's
    own files (the default policy allows the others)."""
    if tool == "read":
        make_pending(store, tool=tool, run_id=run_id, kind="own_files",
                     arguments={"path": f"{OWN_FOLDER}/config.toml"})  # fmt: skip
    else:
        make_pending(store, tool=tool, run_id=run_id)


def _image(icon: QIcon) -> QImage:
    return icon.pixmap(64, 64).toImage()


def _colour_at(image: QImage, x: int, y: int) -> str:
    return image.pixelColor(x, y).name()


def test_each_look_has_its_own_colour_icon_and_words() -> None:
    assert len({look.colour for look in EVERY_LOOK}) == len(EVERY_LOOK)
    assert len({look.words for look in EVERY_LOOK}) == len(EVERY_LOOK)
    images = [_image(look.icon()) for look in EVERY_LOOK]
    assert all(not image.isNull() for image in images)
    for i, image in enumerate(images):
        assert all(image != other for other in images[i + 1 :])
        assert _colour_at(image, *SHAPE) == EVERY_LOOK[i].colour  # the icon is drawn in it


def test_every_colour_carries_white_text_with_enough_contrast() -> None:
    for look in EVERY_LOOK:
        assert danger.contrast(danger.WHITE, look.colour) >= 4.5, look


def test_may_have_run_outranks_every_class_and_destructive_the_other_classes() -> None:
    assert danger.look("read_only", "duplicate") is danger.MAY_HAVE_RUN_LOOK
    assert danger.look("read_only", "interrupted_side_effect") is danger.MAY_HAVE_RUN_LOOK
    assert danger.highest([("destructive", ""), ("read_only", "duplicate")]) is (
        danger.MAY_HAVE_RUN_LOOK
    )
    waiting = [(c, "") for c in ("read_only", "destructive", "remote_mutation")]
    assert danger.highest(waiting) == danger.class_look("destructive")
    assert danger.highest([]) is None
    assert danger.MAY_HAVE_RUN_LOOK.bold and danger.class_look("destructive").bold
    assert not any(danger.class_look(c).bold for c in ("read_only", "local_mutation"))


def test_the_tray_icon_shows_the_highest_class_waiting(store: Store, tray: TrayApp, qtbot) -> None:
    make_pending(store, tool="write", run_id="r1")
    deletion = make_pending(store, tool="delete", run_id="r2")
    qtbot.waitUntil(lambda: len(tray.model.pending) == 2, timeout=5000)
    assert tray.icon_look == danger.class_look("destructive")
    assert _colour_at(_image(tray.tray.icon()), *SHAPE) == danger.class_look("destructive").colour
    assert "the most: destructive" in tray.tray.toolTip()
    assert tray.decide(deletion.id, deletion.request_hash, "reject", "not that")
    assert tray.icon_look == danger.class_look("local_mutation")
    shown = _colour_at(_image(tray.tray.icon()), *SHAPE)
    assert shown == danger.class_look("local_mutation").colour


def test_a_request_that_may_have_run_shows_in_the_tray_above_a_destructive_one(
    store: Store, tray: TrayApp, qtbot
) -> None:
    make_pending(store, tool="delete", run_id="r1")
    make_pending(store, tool="write", run_id="r2", kind="duplicate")
    qtbot.waitUntil(lambda: len(tray.model.pending) == 2, timeout=5000)
    assert tray.icon_look is danger.MAY_HAVE_RUN_LOOK
    shown = _colour_at(_image(tray.tray.icon()), *SHAPE)
    assert shown == danger.MAY_HAVE_RUN_LOOK.colour


def _band_colour(dialog: ApprovalDialog, qtbot) -> str:
    with qtbot.waitExposed(dialog):
        dialog.show()
    band = dialog.band.grab().toImage()
    return _colour_at(band, 6, band.height() // 2)


def test_the_dialog_shows_each_class_in_its_colour_icon_and_words(store: Store, qtbot) -> None:
    seen = []
    for n, (tool, side_effect) in enumerate(CLASSES.items()):
        _waiting(store, tool, f"r{n}")
        pending = next(p for p in read_pending(store) if p.run_id == f"r{n}")
        dialog = ApprovalDialog(pending)
        qtbot.addWidget(dialog)
        look = danger.class_look(side_effect)
        assert dialog.look == look
        assert _band_colour(dialog, qtbot) == look.colour
        assert dialog.band_words.text() == look.words
        assert dialog.band_icon.pixmap().toImage() == look.pixmap(28).toImage()
        seen.append(dialog.band_icon.pixmap().toImage())
        dialog.close()
    assert all(a != b for i, a in enumerate(seen) for b in seen[i + 1 :])


@pytest.mark.parametrize("kind", ["duplicate", "interrupted_side_effect"])
def test_a_request_that_may_have_run_stands_out_in_the_dialog(
    store: Store, qtbot, kind: str
) -> None:
    make_pending(store, tool="write", kind=kind)
    [pending] = read_pending(store)
    dialog = ApprovalDialog(pending)
    qtbot.addWidget(dialog)
    assert dialog.look is danger.MAY_HAVE_RUN_LOOK
    assert _band_colour(dialog, qtbot) == danger.MAY_HAVE_RUN_LOOK.colour
    assert dialog.band_words.text() == "May have run already · Changes this computer"
    assert "bold" in dialog.band_words.styleSheet()
    assert dialog.band_icon.pixmap().toImage() == danger.MAY_HAVE_RUN_LOOK.pixmap(28).toImage()


def test_the_history_shows_each_class_in_its_colour_and_icon(store: Store, qtbot) -> None:
    for n, tool in enumerate(CLASSES):
        _waiting(store, tool, f"r{n}")
    model = RunsModel(store)
    cells = {}
    for row in range(model.rowCount()):
        index = model.index(row, CLASS)
        cells[model.data(index)] = (
            model.data(index, Qt.ItemDataRole.BackgroundRole),
            model.data(index, Qt.ItemDataRole.DecorationRole),
            model.data(index, Qt.ItemDataRole.ForegroundRole),
        )
    assert len(cells) == len(CLASSES)
    for side_effect in CLASSES.values():
        look = danger.class_look(side_effect)
        background, icon, foreground = cells[look.words]
        assert background == QColor(look.colour) and foreground == QColor(danger.WHITE)
        assert _image(icon) == _image(look.icon())


def test_an_outcome_that_may_have_run_stands_out_in_the_history(store: Store, qtbot) -> None:
    cut_off = make_pending(store, tool="write", run_id="r1", kind="interrupted_side_effect")
    make_pending(store, tool="delete", run_id="r2")
    reject(store, "r1", cut_off.id, "operator:test", "not again",
           operator=OperatorKey(MemoryKeyStore()))  # fmt: skip
    model = RunsModel(store)
    [cut] = [r for r in range(model.rowCount()) if model.rows[r].id == "r1"]
    [other] = [r for r in range(model.rowCount()) if model.rows[r].id == "r2"]
    outcome = model.index(cut, OUTCOME)
    assert model.data(outcome) == "Not repeated"
    assert model.data(outcome, Qt.ItemDataRole.BackgroundRole) == QColor(
        danger.MAY_HAVE_RUN_LOOK.colour
    )
    font = model.data(outcome, Qt.ItemDataRole.FontRole)
    assert isinstance(font, QFont) and font.bold()
    assert "May have run already" in model.data(outcome, Qt.ItemDataRole.ToolTipRole)
    plain = model.index(other, OUTCOME)  # pending: nothing to stand out for
    assert model.data(plain, Qt.ItemDataRole.BackgroundRole) is None
    destructive = model.data(model.index(other, CLASS), Qt.ItemDataRole.FontRole)
    assert isinstance(destructive, QFont) and destructive.bold()


def test_a_notification_carries_the_icon_of_its_class_or_of_may_have_run(store: Store) -> None:
    make_pending(store, tool="delete", run_id="r1")
    _waiting(store, "read", "r2")
    make_pending(store, tool="write", run_id="r3", kind="duplicate")
    icons = {p.run_id: message_of(p).icon for p in read_pending(store)}
    assert icons == {
        "r1": danger.class_look("destructive").path,
        "r2": danger.class_look("read_only").path,
        "r3": danger.MAY_HAVE_RUN_LOOK.path,
    }
    assert all(path.is_file() for path in icons.values())
