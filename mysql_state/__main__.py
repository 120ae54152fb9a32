"""``python -m mysql_state ...``: the same as the ``mysql-state`` command."""

import sys

from .cli import main

sys.exit(main())
