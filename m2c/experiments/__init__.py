"""Runnable reproductions on the deliverykit testbed (root); each has --quick."""
