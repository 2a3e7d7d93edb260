"""Which of a table's columns fit a width, and how wide each is drawn (column_fit.py)."""

from gputop_dl.present.tui.column_fit import fit_columns
from gputop_dl.present.tui.table_cells import PAD

COLS = (("name", "Name", 10, False), ("cpu", "CPU", 6, True), ("mem", "Mem", 6, True),
        ("cmd", "Command", 12, False))


def keys(fitted):
    return [c[0] for c in fitted[0]]


def outer(widths):
    return sum(w + 2 * PAD for w in widths)


def test_all_fit_and_flex_takes_what_is_left():
    cols, shown, widths = fit_columns(COLS, 60, flex="cmd")
    assert [c[0] for c in cols] == ["name", "cpu", "mem", "cmd"] and shown == (0, 1, 2, 3)
    assert widths[:3] == (10, 6, 6) and outer(widths) == 60  # cmd: 12 + the spare


def test_narrow_drops_in_drop_order_and_empty_columns_go_first():
    # 42 cells with their padding: at 22, cmd (14) and mem (8) go
    assert keys(fit_columns(COLS, 22, drop_order=("cmd", "mem", "cpu"))) == ["name", "cpu"]
    fitted = fit_columns(COLS, 60, empty={"mem"})
    assert keys(fitted) == ["name", "cpu", "cmd"] and fitted[1] == (0, 1, 3)
    # nothing left to drop: what does not fit is still shown (the line is cut when drawn)
    assert keys(fit_columns(COLS, 10)) == ["name", "cpu", "mem", "cmd"]


def test_grow_takes_what_its_longest_cell_needs_and_yields_make_room():
    # 44 cells: 42 for the four columns with their padding, 2 spare; the name wants 20 (10 more)
    _cols, _shown, widths = fit_columns(COLS, 44, grow="name", grow_want=20)
    assert widths == (12, 6, 6, 12)  # it takes the 2 spare, no column yields
    cols, _shown, widths = fit_columns(COLS, 44, grow="name", grow_want=20, flex="cmd",
                                       grow_yields={"cmd"})
    assert [c[0] for c in cols] == ["name", "cpu", "mem"] and widths == (20, 6, 6)
    # spare after the grow goes to flex; a want below the width changes nothing
    assert fit_columns(COLS, 60, grow="name", grow_want=5, flex="cmd")[2] == (10, 6, 6, 30)
