"""`python -m bot.dashboard link --user LOGIN [--run RUN_ID] [--hours H]`: print a signed link."""
import sys

from . import main

sys.exit(main())
