"""`python -m toolgym` is the `toolgym` command.

`python -m` puts the current folder first on sys.path, where a user's file named click.py
or openai.py would shadow the package of that name: it goes last instead (main() keeps it
there, so a user's own env module still imports)."""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.append(sys.path.pop(0))

from toolgym.cli import main

main()
