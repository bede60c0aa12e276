"""`python -m attncore ...`: the command line's historical entry. It is an entry point, not part of the library:
no attncore module imports it, and the architecture contracts name this one upward import (to cli) explicitly.
"""

import sys

from cli.main import main

sys.exit(main())
