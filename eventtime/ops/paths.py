"""Where a location is on this machine: the one rule for the tables' and the checkpoint's paths.

A location is a path or a URI; a ``file:`` URI and a plain path (relative ones against the
working directory) are local, any other URI (``s3a://``, ``abfss://``, ``gs://``...) is not.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Optional

__all__ = ["local_path"]


def local_path(path: str) -> Optional[str]:
    """The absolute local file system path of a location, ``None`` for a remote URI.

    A ``file:`` URI is read as a URI (its path percent-decoded), a plain path made absolute.

    >>> local_path("file:///chk/orders"), local_path("/chk/orders"), local_path("s3a://b/chk")
    ('/chk/orders', '/chk/orders', None)
    >>> local_path("file:/data/late%20rows/")
    '/data/late rows'
    >>> local_path("chk/orders") == os.path.join(os.getcwd(), "chk", "orders")
    True
    """
    if path.startswith("file:"):
        return os.path.abspath(urllib.parse.unquote(urllib.parse.urlparse(path).path) or "/")
    if "://" in path:
        return None
    return os.path.abspath(path)
