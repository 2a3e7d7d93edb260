"""The suite's xdist scheduler: the tests that hold the box go to one worker, after all others.

pytest-xdist's `loadgroup` would send an `xdist_group("heavy")` to one worker, but with pytest
9.2 the group is silently ignored (xdist renames `item._nodeid`, which pytest no longer reads),
so the heavy tests were spread over every worker and only the file lock (conftest.heavy_lock)
kept them apart. This scheduler is xdist's `load` for every other test; the heavy ones are
held back until no other test is left to hand out, then the first worker that asks gets all of
them, in their order. On one worker, one after another, the heavy tests of a module can share
what they start (a module-scoped fixture: its scripts run only while that module's tests do),
and the worker holds the box from its first heavy test to its last (conftest.the_box).

Which tests are heavy is decided where the items are, in the workers (conftest.holds_the_box):
each worker writes their IDs to a file the controller names in its `workerinput`, before it
reports its collection; the scheduler reads the file once every collection is in.
"""

from __future__ import annotations

import json
import os
from typing import Any

from xdist.scheduler import LoadScheduling

INPUT_KEY = "gputop_dl_heavy_ids"  # the file's path, in each worker's workerinput


def write_heavy_ids(path: str, ids: list[str]) -> None:
    """Every worker writes the same list; each replaces the file whole (rename)."""
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(ids, f)
    os.replace(tmp, path)


class BoxScheduling(LoadScheduling):
    """`--dist load` for the tests that share the box; the heavy ones to one worker, last."""

    def __init__(self, config: Any, log: Any, ids_path: str) -> None:
        super().__init__(config, log)
        self.ids_path = ids_path
        self.held: list[int] = []  # the heavy tests' indices, not yet handed out

    def _heavy_ids(self) -> set[str]:
        try:
            with open(self.ids_path, encoding="utf-8") as f:
                return set(json.load(f))
        except (OSError, ValueError):  # no worker wrote it: nothing is held back
            return set()

    @property
    def tests_finished(self) -> bool:
        return not self.held and super().tests_finished

    @property
    def has_pending(self) -> bool:
        return bool(self.held) or super().has_pending

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a worker added later: hand it work as to the others
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.node2collection.values())))
        heavy = self._heavy_ids()
        self.pending[:] = [i for i, t in enumerate(self.collection) if t not in heavy]
        self.held = [i for i, t in enumerate(self.collection) if t in heavy]
        if self.maxschedchunk is None:
            self.maxschedchunk = len(self.collection)
        # a first chunk each, as `load` does: a quarter of a worker's share, at least 2
        chunk = max(2, min(len(self.pending) // len(self.nodes) // 4, self.maxschedchunk))
        for node in self.nodes:
            self._send_tests(node, chunk)
        for node in self.nodes:
            if not self.node2pending[node]:
                self.check_schedule(node)  # nothing to share out: the held ones, or shutdown

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if self.pending:
            super().check_schedule(node, duration)
            return
        if self.held:  # nothing else left to hand out: this worker runs every heavy test
            held, self.held = self.held, []
            self.node2pending[node].extend(held)
            node.send_runtest_some(held)
            return
        node.shutdown()
