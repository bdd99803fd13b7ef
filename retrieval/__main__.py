import sys

from retrieval.cli import main

sys.exit(main())
