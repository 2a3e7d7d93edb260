"""The key bar: one line of the screen's shown key bindings, drawn as text (not a widget per key).

Textual's `Footer` builds a widget per binding and restyles them at mount: about 35 ms of the
monitor's first frame on a 2-core box (docs/benchmarks.md). This bar draws the same keys from
`screen.active_bindings` in one `render()`: the key in bold, its description, dimmed when the
action is disabled, the command palette's key on the right; redrawn when the screen's bindings
change; a click on a key presses it, as the footer's keys do. Keys of one binding group are one
entry ("j/k Move", "c/m/n/t/o Sort"); a hidden binding (`show=False`) is only an alias. On a
narrow screen every key stays: descriptions go, from the last key back ("? Help" keeps its own).
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual import events
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget

SEP = "  "


class KeyBar(Widget, can_focus=False):
    """The bottom line of keys: what `Footer` shows, drawn as one line of text."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-description-foreground;
    }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._spans: list[tuple[int, int, str]] = []  # (x0, x1, key) of each key drawn

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def _keys(self) -> tuple[list[tuple[str, str, bool, str]], tuple[str, str, bool, str] | None]:
        """([(key display, description, enabled, key)], the command palette's or None)."""
        app = self.app
        active = self.screen.active_bindings
        seen: set[str] = set()
        keys: list[tuple[str, str, bool, str]] = []
        last_group = None
        for _node, binding, enabled, _tooltip in active.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)  # one key per action, as the footer shows it
            display = app.get_key_display(binding)
            if binding.group is not None and binding.group == last_group:
                shown, description, was_enabled, key = keys[-1]
                keys[-1] = (f"{shown}/{display}", description, was_enabled or enabled, key)
                continue
            last_group = binding.group
            keys.append((display, binding.group.description if binding.group else binding.description,
                         enabled, binding.key))
        palette = None
        if app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in active:
            _node, binding, enabled, _tooltip = active[app.COMMAND_PALETTE_BINDING]
            palette = (app.get_key_display(binding), binding.description, enabled, binding.key)
        return keys, palette

    def render(self) -> Content:
        keys, palette = self._keys()
        width = self.size.width
        # a narrow screen: every key stays, their descriptions go from the last one back
        # ("? Help" stays whole: it lists them all), then the palette's
        plain = [cell_len(d) + 1 + cell_len(t) for d, t, _e, _k in keys]
        need = 1 + sum(plain) + len(SEP) * max(0, len(keys) - 1)
        if palette is not None:
            need += 1 + cell_len(palette[0]) + 1 + cell_len(palette[1]) + 1
        bare = [False] * len(keys)
        for i in reversed(range(len(keys))):
            if need <= width:
                break
            if keys[i][3] != "question_mark":
                bare[i] = True
                need -= 1 + cell_len(keys[i][1])
        bare_palette = palette is not None and need > width
        parts: list[Content] = []
        spans: list[tuple[int, int, str]] = []
        x = 1
        for (display, description, enabled, key), short in zip(keys, bare):
            style = "bold $footer-key-foreground" if enabled else "dim"
            item = (Content.styled(display, style) if short else
                    Content.assemble((display, style), " ", (description, "" if enabled else "dim")))
            spans.append((x, x + item.cell_length, key))
            parts.append(item)
            x += item.cell_length + len(SEP)
        left = Content(" ") + Content(SEP).join(parts)
        if palette is not None:
            display, description, enabled, key = palette
            right = Content.assemble(("▏", "$foreground 20%"), (display, "bold $footer-key-foreground"),
                                     *(() if bare_palette else (" ", description)), " ")
            gap = width - left.cell_length - right.cell_length
            if gap >= 1:
                spans.append((width - right.cell_length + 1, width, key))
                left = left + Content(" " * gap) + right
        self._spans = spans
        return left

    def on_click(self, event: events.Click) -> None:
        for x0, x1, key in self._spans:
            if x0 <= event.x < x1:
                event.stop()
                self.app.simulate_key(key)
                return
