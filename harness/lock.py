"""One run at a time over build/: a second run is told who holds it and
either waits (--wait) or ends."""
import fcntl
import os
import sys
import time
from typing import IO, Optional

from common import BUILD, StageError, say

LOCK_FILE = os.path.join(BUILD, ".lock")


class BuildLock:
    """Holds build/.lock (flock) while open; the file names the holder.
    The kernel drops the lock when the process ends, however it ends."""

    def __init__(self, wait: bool):
        self.wait = wait
        self.file: Optional[IO[str]] = None

    def __enter__(self) -> "BuildLock":
        os.makedirs(BUILD, exist_ok=True)
        f = open(LOCK_FILE, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            if not self.wait:
                f.close()
                raise StageError("lock", "build/ is in use by %s; run again "
                                 "when it ends, or add --wait" % holder) from None
            say("lock: build/ is in use by %s; waiting" % holder)
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write("pid %d (%s, since %s)\n" % (
            os.getpid(), " ".join(["./bulk"] + sys.argv[1:]),
            time.strftime("%H:%M:%S")))
        f.flush()
        self.file = f
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.file is not None
        self.file.truncate(0)
        self.file.close()
