"""``python -m eventtime``: the same as the ``eventtime`` command."""

import sys

from .cli import main

sys.exit(main())
