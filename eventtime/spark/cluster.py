"""A Spark standalone master checked before a session is built for it.

Spark's standalone client does not fail fast on a master that is not there: it tries to
register 3 times, 20 s apart (``StandaloneAppClient``, not configurable), then gives up and
stops the context from another thread, so a job reaches its first action with a dead
context or waits for executors that never come. :func:`check_master` connects to the
master's port (each one of a ``spark://h1:p1,h2:p2`` list) first and refuses, in at most
``timeout_s`` per master, with the URL and what to do.
"""

from __future__ import annotations

import socket
from typing import Optional

__all__ = ["check_master", "MasterUnreachableError", "standalone_masters"]

DEFAULT_PORT = 7077


class MasterUnreachableError(RuntimeError):
    """No master of a ``spark://`` URL accepts connections."""


def standalone_masters(master: Optional[str]) -> list[tuple[str, int]]:
    """The (host, port) pairs of a ``spark://`` master URL; [] for any other master (``local``,
    ``yarn``, ``k8s://``, ``local-cluster``...).

    >>> standalone_masters("spark://a:7077,b:7078")
    [('a', 7077), ('b', 7078)]
    >>> standalone_masters("local[2]")
    []
    """
    if not master or not master.startswith("spark://"):
        return []
    pairs = []
    for part in master[len("spark://"):].split(","):
        part = part.strip().rstrip("/")
        if not part:
            continue
        if part.startswith("["):  # [ipv6]:port
            host, _, rest = part[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port = part.rpartition(":") if ":" in part else (part, "", "")
        if not host or (port and not port.isdigit()):
            raise ValueError(f"not a Spark standalone master URL: {master!r} (expected spark://HOST:PORT)")
        pairs.append((host, int(port) if port else DEFAULT_PORT))
    if not pairs:
        raise ValueError(f"not a Spark standalone master URL: {master!r} (expected spark://HOST:PORT)")
    return pairs


def check_master(master: Optional[str], timeout_s: float = 5.0) -> None:
    """Refuse a ``spark://`` master none of whose hosts accepts a TCP connection on its port.

    Does nothing for other masters. Raises :class:`MasterUnreachableError` naming the URL,
    each host's error and what to do; takes at most ``timeout_s`` per listed master.
    """
    pairs = standalone_masters(master)
    if not pairs:
        return
    errors = []
    for host, port in pairs:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    raise MasterUnreachableError(
        f"cannot reach the Spark master {master} ({'; '.join(errors)}). Start the master there "
        f"(bin/spark-class org.apache.spark.deploy.master.Master --host HOST --port PORT, or "
        f"sbin/start-master.sh) and its workers, or pass the URL of a running one (--master "
        f"spark://HOST:PORT: the master's log line 'Starting Spark master at spark://...' and its web "
        f"UI show it); for a local run use --master 'local[2]'."
    )
