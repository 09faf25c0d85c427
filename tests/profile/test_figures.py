"""The shared figure saver: a crowded figure is written, not failed (warnings are errors here)."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from roost.figures import save_figure


def test_a_figure_too_crowded_for_tight_layout_is_still_saved_and_closed(tmp_path: Path) -> None:
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.set_ylabel("a long label\n" * 30)  # no margin can hold it: tight_layout gives up
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = save_figure(fig, tmp_path / "crowded.png", dpi=50)
    assert path.read_bytes().startswith(b"\x89PNG")
    assert not plt.fignum_exists(fig.number)
