"""The `kbit` console script of the Python package: runs the kbit command installed inside the package
(kbit/_bin/kbit, beside the libraries in kbit/_lib), with this process's arguments and environment."""
import os
import sys
from pathlib import Path


def main():
    command = Path(__file__).resolve().parent / "_bin" / "kbit"
    if not command.exists():
        sys.exit(f"kbit: this installation has no kbit command ({command} is missing; "
                 "it is built by `pip install .` and present in the binary wheel)")
    os.execv(command, [str(command)] + sys.argv[1:])
