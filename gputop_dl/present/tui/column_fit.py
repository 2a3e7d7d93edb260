"""Which of a table's columns fit a width, and how wide each is drawn.

Columns that do not fit are left out in `drop_order`; the `grow` column takes what width is
left, up to what its longest cell needs (`grow_want`), and where that is not enough the columns
of `grow_yields` are left out for it, `flex` first, then in drop order; `flex` takes the width
the others leave. Pure: the keyed table (keyed_table.py) calls it when its width, its empty
columns or its styles changed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gputop_dl.present.tui.table_cells import PAD

Column = tuple[str, str, int, bool]  # key, label, width, right-justified


def fit_columns(columns: Sequence[Column], width: int, *, empty: Collection[str] = (),
                drop_order: Sequence[str] = (), grow: str | None = None, grow_want: int = 0,
                grow_yields: Collection[str] = (), flex: str | None = None,
                ) -> tuple[tuple[Column, ...], tuple[int, ...], tuple[int, ...]]:
    """The columns shown at `width` (those of `empty` left out), their indices in `columns`,
    and the widths they are drawn at (without the padding)."""
    cols = [c for c in columns if c[0] not in empty]
    drop = list(drop_order)
    while sum(w + 2 * PAD for _k, _l, w, _r in cols) > width and drop:
        gone = drop.pop(0)
        cols = [c for c in cols if c[0] != gone]
    spare = max(0, width - sum(w + 2 * PAD for _k, _l, w, _r in cols))
    want = max([0] + [grow_want - w for k, _l, w, _r in cols if k == grow])
    yields = [k for k in (flex, *drop) if k is not None and k in grow_yields]
    while want > spare and yields:  # the name before the columns that yield to it
        gone = yields.pop(0)
        spare += sum(w + 2 * PAD for k, _l, w, _r in cols if k == gone)
        cols = [c for c in cols if c[0] != gone]
    grown = {k: min(spare, want) for k, _l, _w, _r in cols if k == grow}
    spare -= sum(grown.values())
    shown = tuple(list(columns).index(c) for c in cols)
    widths = tuple(w + spare if k == flex else w + grown.get(k, 0) for k, _l, w, _r in cols)
    return tuple(cols), shown, widths
