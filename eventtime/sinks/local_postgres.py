"""A throwaway PostgreSQL server in a temporary directory, for tests and examples.

``initdb`` + ``pg_ctl`` of the installed PostgreSQL (Debian's ``postgresql`` package: the
README's set-up installs it when missing), listening on 127.0.0.1 on a free port, trust
authentication, removed on exit. PostgreSQL refuses to run as root: as root the server runs
as the ``postgres`` user (``runuser``), which the package creates.

>>> with LocalPostgres() as pg:                                      # doctest: +SKIP
...     sink = PostgresSink(pg.conninfo, "results", pipeline="demo")
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from typing import Optional

__all__ = ["LocalPostgres", "find_pg_bin"]


def find_pg_bin() -> Optional[str]:
    """The directory of ``initdb`` / ``pg_ctl``: on the PATH, else Debian's /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """Start a private server (:meth:`start`, or ``with``); :attr:`conninfo` connects to it."""

    def __init__(self, port: Optional[int] = None, user: str = "eventtime", database: str = "postgres") -> None:
        self.bin = find_pg_bin()
        if self.bin is None:
            raise RuntimeError(
                "PostgreSQL is not installed (no initdb / pg_ctl on the PATH or in /usr/lib/postgresql/*/bin): "
                "install Debian's postgresql package (the README's set-up does: scripts/ensure-postgres.sh)"
            )
        self.port = port or _free_port()
        self.user = user
        self.database = database
        self.root = tempfile.mkdtemp(prefix="eventtime-pg-")
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "server.log")
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", self.data, "-U", self.user, "-A", "trust", "-E", "UTF8", "--no-sync")

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={self.database}"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [os.path.join(self.bin, tool), *args]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True)
        if check and done.returncode != 0:
            log = open(self.log).read()[-2000:] if os.path.exists(self.log) else ""
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{log}")
        return done

    def start(self) -> "LocalPostgres":
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-w", "-t", "60", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``mode="immediate"`` is a crash (no shutdown checkpoint)."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def cleanup(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "LocalPostgres":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
