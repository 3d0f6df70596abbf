"""CLI subcommand groups (see orchestrator.cli)."""
