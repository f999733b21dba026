"""Where the repository's own files are, for the commands and tools that read them."""

from pathlib import Path
from typing import Final

# manager/ sits at the top of the repository (editable installs and the image keep that).
REPO_ROOT: Final = Path(__file__).resolve().parent.parent
