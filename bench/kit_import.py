"""The csdkit package for the Python benchmarks: from sys.path (scripts/build's csdkit.pth), else
from this checkout's build/release/python; a clear exit naming the script otherwise."""

import importlib
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def import_csdkit(script, module="csdkit"):
    """Imports `module` (csdkit or csdkit.torch) and returns the csdkit package."""
    try:
        importlib.import_module(module)
    except ImportError:
        build = REPO_ROOT / "build" / "release" / "python"
        if not (build / "csdkit").is_dir():
            sys.exit("{}: cannot import csdkit; expected it on sys.path or in {} (build the "
                     "project first, or set PYTHONPATH)".format(script, build))
        sys.path.insert(0, str(build))
        importlib.import_module(module)
    return sys.modules["csdkit"]
