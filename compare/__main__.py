import sys

from backends.profiled import profiled
from compare.cli import main

with profiled("runner"):
    code = main()
sys.exit(code)
