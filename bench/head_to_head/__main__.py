import sys

from bench.head_to_head.main import main

sys.exit(main())
