#!/usr/bin/env python3
"""Passes a libtest run's output through and then prints its slowest tests.

    cargo test ... -- --test-threads N 2>&1 | scripts/test-times.py N [COUNT]

libtest prints a test's name only when it ends, but it starts tests in the order of their
names, N at a time, each as soon as another ended. From the time each line arrives, this
replays that schedule to find when each test started, so each test's time is exact to the
moment its line was read. It reads the first test binary's run (`running K tests` up to its
`test result:` line), which is the only one in `make test`'s end-to-end step; should the
ends not fit the schedule, it says so instead of printing times it cannot vouch for.
"""

import re
import sys
import time

RESULT = re.compile(r"^test (\S+)(?: - should panic)? \.\.\. (ok|FAILED|ignored)")


def read():
    """Echoes stdin; returns the run's start and its tests' ends, in order."""
    start, ends = None, []
    for line in sys.stdin:
        now = time.monotonic()
        sys.stdout.write(line)
        sys.stdout.flush()
        if start is None and re.match(r"^running \d+ tests?$", line):
            start = now
        elif start is not None and line.startswith("test result:"):
            break
        elif start is not None and (match := RESULT.match(line)):
            ends.append((now, match.group(1), match.group(2)))
    for line in sys.stdin:
        sys.stdout.write(line)
    return start, ends


def replay(threads, start, ends):
    """Each test's (seconds, name), or None when the ends do not fit libtest's schedule."""
    # An ignored test takes its turn in the schedule too, and ends at once.
    ran = [(at, name) for at, name, _ in ends]
    waiting = sorted(name for _, name in ran)
    started = {}
    while waiting and len(started) < threads:
        started[waiting.pop(0)] = start
    times = []
    for at, name in ran:
        if name not in started:
            return None
        times.append((at - started.pop(name), name))
        if waiting:
            started[waiting.pop(0)] = at
    return times


def main():
    threads = int(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    start, ends = read()
    if start is None or not ends:
        return
    times = replay(threads, start, ends)
    if times is None:
        print("!! test times: the tests did not end as libtest schedules them; no times shown")
        return
    print(f"== the {count} slowest of {len(times)} tests ({threads} at a time)")
    for seconds, name in sorted(times, reverse=True)[:count]:
        print(f"{seconds:7.2f} s  {name}")


if __name__ == "__main__":
    main()
