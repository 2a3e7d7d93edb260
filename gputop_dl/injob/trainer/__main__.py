"""Entry point of the trainer child process: reads a workload spec and trains it."""

import sys

from gputop_dl.injob.trainer.loop import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
