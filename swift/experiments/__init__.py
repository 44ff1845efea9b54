"""Runnable reproductions of the paper's experiments (each with --quick)."""
