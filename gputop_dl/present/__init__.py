"""Presenters: the headless console, the one-shot snapshot, reports and the Textual TUI."""
