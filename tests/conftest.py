"""Suite-wide set-up: the owner key of the outputs the tests write lives in a temporary folder.

Runs seal their outputs with this user's owner key (calibrate/files/ownerkey.py), made on first use in the
user's state folder. The suite points CALIBRATE_STATE_DIR at a folder of the session's own (one per
xdist worker; subprocesses inherit it), so that no test reads or makes a key in the real home, and
a fresh machine (CI) needs nothing set up.
"""

from __future__ import annotations

import os

import pytest

from calibrate.files.ownerkey import ENV


@pytest.fixture(autouse=True, scope="session")
def _owner_key_outside_home(tmp_path_factory):
    previous = os.environ.get(ENV)
    os.environ[ENV] = str(tmp_path_factory.mktemp("calibrate-state"))
    yield
    if previous is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = previous
