"""Fixtures for the capture-analysis tests."""

import subprocess

import pytest


@pytest.fixture
def procs():
    """Processes started by a test; all stopped at the end."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
