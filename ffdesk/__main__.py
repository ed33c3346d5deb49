import sys

from ffdesk.cli import main
from ffdesk.training.launch import in_torchrun, leave_rank

code = main()
if in_torchrun():
    leave_rank(code)
sys.exit(code)
