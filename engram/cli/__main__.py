"""`python -m engram.cli`: the core command line, without the protocol servers."""

import sys

from engram.cli.main import exit_process, main

exit_process(sys.argv[1:], main())
