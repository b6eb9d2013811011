# In place of PyInstaller's run-time hook for PySide6, which imports PySide6.QtCore at every
# start to embed a qt.conf: that loads Qt (and ICU) into `signoff proxy` and every terminal
# command, which never use it (tests/packaging/test_bundle.py checks they do not). The PyPI
# wheel's QtCore embeds its own qt.conf when the app imports it, so only the paths are set here.
import os
import sys

_qt = os.path.join(sys._MEIPASS, "PySide6", *(() if sys.platform == "win32" else ("Qt",)))
os.environ["QT_PLUGIN_PATH"] = os.path.join(_qt, "plugins")
if sys.platform == "win32":
    # QtNetwork finds OpenSSL's DLLs collected beside the executable.
    os.environ["PATH"] = sys._MEIPASS + os.pathsep + os.environ.get("PATH", "")
elif sys.platform == "darwin" and not sys._MEIPASS.endswith("Contents/Frameworks"):
    # Outside an .app, QtNetwork finds OpenSSL through the library path.
    os.environ["DYLD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (sys._MEIPASS, os.environ.get("DYLD_LIBRARY_PATH")) if p
    )
del _qt
