import sys

from stepwall.cli import main

sys.exit(main())
