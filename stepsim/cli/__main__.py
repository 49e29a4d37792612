import sys

from stepsim.cli import main

sys.exit(main())
