"""``python -m eventtime``: the same as the ``eventtime`` command."""

from .cli import console

console()
