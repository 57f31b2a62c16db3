"""``python -m bench``: the default benchmark (``bench.run``)."""

import sys

from bench.run import main

sys.exit(main())
