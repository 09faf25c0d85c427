"""Saving a report's matplotlib figure: one place for the layout, the file and the cleanup."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

__all__ = ["save_figure"]


def save_figure(fig: Any, path: Path, *, dpi: int = 110) -> Path:
    """Lay `fig` out, write it to `path` and close it (pyplot keeps open figures alive)."""
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        # Long legends can leave tight_layout no room; it then keeps the layout as it is and
        # warns. The figure is still complete, so that warning must not fail a report.
        warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
