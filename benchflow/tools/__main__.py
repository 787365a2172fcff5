"""`python -m benchflow.tools` is `python -m benchflow.tools.server`."""

from benchflow.tools.server import main

main()
