"""`python -m reconciler` is the `fleet` command."""

from .cli import main

main()
