"""roost's command line: the composition root that wires the packages into commands."""
