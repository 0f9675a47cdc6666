"""``python -m eventtime.cli``: the same as the ``eventtime`` command."""

from . import console

console()
