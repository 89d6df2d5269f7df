"""The check-and-report pattern of the Python-driven ctest scripts (tests/io/test_writer.py,
tests/cli/test_quantize.py, tests/cli/test_golden.py): every check is counted, every failure kept,
and the script ends with one result line for ctest's log."""
import shutil
import sys


class Checks:
    def __init__(self, name):
        self.name, self.count, self.failures = name, 0, []

    def __call__(self, cond, what):
        self.count += 1
        if not cond:
            self.failures.append(what)

    def finish(self, tmp, summary):
        """Exit 1 listing the failures (keeping tmp to look at), else remove tmp and print the summary."""
        if self.failures:
            print(f"{self.name} FAILED ({len(self.failures)} of {self.count}):", *self.failures, sep="\n  ")
            print(f"(files kept in {tmp})")
            sys.exit(1)
        shutil.rmtree(tmp)
        print(f"{self.name}: OK ({self.count} checks, {summary})")
