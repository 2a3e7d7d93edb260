"""Readable text colours: the theme's `$text-success`, `-warning`, `-error` and `-accent`,
darkened (a light theme) or lightened (a dark one) until they read on the screen's panels.

Textual's light themes make these a shade of the tone meant for its muted background; on the
panels' own surface some read at 2.5–3.5:1 (textual-light's warning 3.0:1, atom-one-light's
success 2.5:1), under the 4.5:1 that WCAG asks of text. The screen writes slowdowns, waits,
statuses and the verdict's title in them, so each is moved, in small steps, to the first shade
that reads at 4.5:1 on the surface, the panel and the tone's muted background (the verdict
banner's). A colour that already reads is kept as the theme has it, and so are the ANSI
themes' (the terminal's palette decides how they look).
"""

from __future__ import annotations

from textual.color import Color, ColorParseError

MIN_CONTRAST = 4.5  # WCAG 2 AA, normal text
TEXT_TONES = (("text-success", "success"), ("text-warning", "warning"), ("text-error", "error"),
              ("text-accent", "accent"))
STEP = 0.03  # darken/lighten step (Textual's Color.darken amount)


def contrast(a: Color, b: Color) -> float:
    """WCAG contrast ratio of two opaque colours (1 to 21)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _luminance(c: Color) -> float:
    def channel(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b)


def _parse(value: str | None) -> Color | None:
    try:
        return Color.parse(value) if value else None
    except ColorParseError:
        return None


def readable(variables: dict[str, str], dark: bool) -> dict[str, str]:
    """`variables` (a theme's CSS variables) with its tone text colours made readable."""
    base = _parse(variables.get("background"))
    if base is None or base.ansi is not None:  # the terminal's own palette (ansi-*): not ours to judge
        return variables
    out = dict(variables)
    for var, tone in TEXT_TONES:
        colour = _parse(variables.get(var))
        if colour is None or colour.a < 1 or colour.ansi is not None:
            continue
        backs = [base + c for c in (_parse(variables.get(k)) for k in ("surface", "panel", f"{tone}-muted"))
                 if c is not None]
        backs.append(base)
        moved = colour
        for _ in range(40):
            if min(contrast(moved, b) for b in backs) >= MIN_CONTRAST:
                break
            moved = moved.lighten(STEP) if dark else moved.darken(STEP)
        if moved != colour:
            out[var] = moved.hex
    return out
