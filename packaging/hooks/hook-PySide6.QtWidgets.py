# PyInstaller's hook for this PySide6 module, less the Qt files Signoff does not use
# (packaging/bundle.py says which, and why).
import bundle

hiddenimports, binaries, datas = bundle.qt_hook(__file__)
