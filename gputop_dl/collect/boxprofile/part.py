"""One resource's part of the machine profile: a JSON object (schema gputop-dl.machine/1)."""

from __future__ import annotations

from typing import Any

Part = dict[str, Any]
