"""Signoff's desktop app (PySide6): tray, notifications, approval dialog, history, settings.

Importing this package imports no Qt; the Qt modules are imported by the app's entry point.
"""
