#!/usr/bin/python3
"""Enqueues N jobs of kind "crosslang" for the cross-language test.

usage: crosslang_enqueue.py DATABASE_URL QUEUE N

The jobs go in with one jobs_enqueue_many per 1000; payload {"n": i, "from": "python"}.
Prints the number of jobs enqueued. Run it with clients/python on PYTHONPATH.
"""

import sys

import skiplock


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    url, queue, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    done = 0
    with skiplock.Client(url) as client:
        for start in range(0, n, 1000):
            count = min(1000, n - start)
            ids = client.enqueue_many(["crosslang"] * count,
                                      [{"n": start + i, "from": "python"} for i in range(count)],
                                      queues=[queue] * count)
            done += len(ids)
    print(done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
