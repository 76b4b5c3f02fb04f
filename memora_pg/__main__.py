from __future__ import annotations

import sys

from memora_pg.cli import main

sys.exit(main())
