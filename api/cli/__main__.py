"""`python -m kraft.api.cli`."""

from kraft.api.cli import main

main()
