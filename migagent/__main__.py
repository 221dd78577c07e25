import sys

from migagent.cli import main

sys.exit(main())
