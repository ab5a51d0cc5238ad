"""`python -m toolgym` is the `toolgym` command."""

from toolgym.cli import main

main()
