"""Build the native kernels now: `python -m archprobe.ops.native`."""

import sys

from archprobe.ops.native import main

sys.exit(main())
