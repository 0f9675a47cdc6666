"""A warm ``eventtime demo`` runner for the crash / restart tests.

Starting the demo as a new process costs a JVM and a Spark session (about 10 s here) and a
cold first micro-batch (about 7 s of class loading and code generation). The runs that do not
need a process of their own (a baseline, a restart after a kill, a refused start) run here
instead, one after the other, in one process and one Spark session: each is the ``eventtime
demo`` command itself (``eventtime.cli.main``), on its own output directory, checkpoint and
tables, so no state is shared between runs but the warm JVM. The runs that are killed stay
new processes (``test_crash_restart.run_demo``): a real SIGKILL of a real process is their point.

Protocol, one JSON object per line: the test writes ``{"argv": [...], "env": {...}, "log":
path}`` to this process' stdin; the command runs with ``env`` set (and ``FAULT_ENV`` /
``SENTRY_DSN`` unset unless given), everything it prints -- Python and the JVM, file
descriptors 1 and 2 -- goes to ``log`` as it happens; then ``{"code": exit code}`` is written
to the original stdout.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

CLEARED = ("EVENTTIME_FAULT", "SENTRY_DSN")


def _run(command: dict) -> int:
    from eventtime.cli import main

    saved_env = dict(os.environ)
    for name in CLEARED:
        os.environ.pop(name, None)
    os.environ.update(command.get("env", {}))
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = os.dup(1), os.dup(2)
    with open(command["log"], "w", encoding="utf-8") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            code = main(command["argv"], hard_exit=False)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - reported to the test through the log and the code
            traceback.print_exc()
            code = 3
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            for fd in saved_fds:
                os.close(fd)
            os.environ.clear()
            os.environ.update(saved_env)
    return code


def main() -> None:
    control = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # nothing but the protocol on the control channel
    from eventtime.spark import local_session

    local_session(app_name="eventtime-demo").range(1).collect()
    control.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if line.strip():
            control.write(json.dumps({"code": _run(json.loads(line))}) + "\n")


if __name__ == "__main__":
    main()
