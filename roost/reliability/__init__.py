"""Reliability tooling: drive real episodes without a model (`episodes`), sample what a run holds
on the host (`probes`), and the leak soak behind `scripts/soak` (`soak`)."""
