"""Runnable reproductions of the paper's tables and figures (each with --quick)."""
