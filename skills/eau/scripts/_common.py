"""Makes the skill's scripts runnable from anywhere: puts the project root on sys.path."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
