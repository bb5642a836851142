"""A rank that torchrun terminates (because another rank failed) says so before it exits.

In ``test_torchrun.py`` the failing rank's peer usually sees the broken connection first; which
of the two wins is a race, so the signal path is checked here on its own, in a child process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import os, signal, time
    from pointrix_lite import distributed
    distributed._explain_sigterm()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)  # not reached: the handler exits
    print("handler did not exit")
    """
)


def test_sigterm_under_torchrun_prints_the_rank_and_exits_143():
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
    run = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 128 + signal.SIGTERM, run.stderr
    assert run.stderr.startswith("error (rank 1): stopped because another rank failed or the job was stopped")
    assert "handler did not exit" not in run.stdout
