"""A program for tests of app/services/kit/apart.py: writes its process id to the file its
request names, then sleeps until stopped."""

import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    Path(sys.stdin.read()).write_text(str(os.getpid()))
    time.sleep(600)
