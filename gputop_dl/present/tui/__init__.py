"""The Textual TUI: live monitor (`gputop-dl`) and launch view (`gputop-dl launch FILE`).

Only this package imports textual. `app.py` holds `GputopApp` and `fleet_app.py` the fleet view's
`FleetApp`, which gputop_dl.runner builds and runs; each panel has its own module; modal screens
are in `screens.py`.
The UI renders immutable `Snapshot`s handed over by a sampling thread; it never samples itself.
"""
