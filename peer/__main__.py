import sys

from gleam.peer.cli import main

sys.exit(main())
