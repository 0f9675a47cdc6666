"""``python -m eventtime.cli``: the same as the ``eventtime`` command."""

import sys

from . import main

sys.exit(main())
