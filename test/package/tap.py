"""tap.py — the check counter the package checks share: one 'ok - ' / 'not ok - ' line per
check, then '<name>: N passed, M failed' and an exit status."""
import sys


class Checks:
    """Counts checks and prints them as they are made."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        """Print one check's line and count it."""
        print(('ok - ' if ok else 'not ok - ') + what)
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def finish(self):
        """Print the summary line and exit: 1 when any check failed."""
        print(f'{self.name}: {self.passed} passed, {self.failed} failed')
        sys.exit(1 if self.failed else 0)
