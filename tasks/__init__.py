"""tasks: see docs/architecture.md."""
