"""`benchmarks/` sits at the repository's top level, outside the installed package: import it from there."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
