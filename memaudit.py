"""Run the memaudit CLI without installing: `python memaudit.py …`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memaudit.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
