"""`python -m api.cli`."""

from api.cli import main

main()
