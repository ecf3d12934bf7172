"""Side-by-side timing: the functions compared run in one process, in interleaved
rounds, so that a machine shared with other work slows them alike; the median is kept."""

import statistics
import time


def median_seconds(funcs, rounds, min_time):
    """Median seconds per call of each function, rounds interleaved."""
    reps = []
    for f in funcs:
        t, k = time.perf_counter(), 0
        while time.perf_counter() - t < min_time:
            f()
            k += 1
        reps.append(max(1, k))
    samples = [[] for _ in funcs]
    for _ in range(rounds):
        for f, r, s in zip(funcs, reps, samples):
            t = time.perf_counter()
            for _ in range(r):
                f()
            s.append((time.perf_counter() - t) / r)
    return [statistics.median(s) for s in samples]
