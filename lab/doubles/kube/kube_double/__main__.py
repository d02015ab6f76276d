"""`python -m kube_double`, and what the zip application the lab mirror builds runs: the program named by argv[0]."""

import sys

from kube_double.cli import main

sys.exit(main())
