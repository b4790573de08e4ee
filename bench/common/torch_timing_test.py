"""torch_timing's median and call pattern, against a stand-in for torch.cuda
whose events return set times: the order of calls and records, the
median of odd and even counts, and the cold-set count."""
import unittest

import junit_unittest
import torch_timing


class FakeCuda:
    def __init__(self, elapsed_ms):
        self.log, self.elapsed, self.synced = [], list(elapsed_ms), 0
        outer = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self):
                outer.log.append("record")
                self.t = len(outer.log)

            def elapsed_time(self, stop):
                assert outer.synced, "elapsed_time read before a synchronisation"
                assert self.t is not None and stop.t is not None and stop.t > self.t
                return outer.elapsed.pop(0)

        self.Event = Event

    def synchronize(self):
        self.synced += 1


class FakeTorch:
    def __init__(self, elapsed_ms):
        self.cuda = FakeCuda(elapsed_ms)


class TorchTiming(unittest.TestCase):
    def test_median_of_odd_and_even_counts(self):
        self.assertEqual(torch_timing.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(torch_timing.median([4.0, 1.0, 3.0, 2.0]), 2.5)
        with self.assertRaises(ValueError):
            torch_timing.median([])

    def test_median_us_times_each_run_between_its_events_after_the_warmup(self):
        torch = FakeTorch([0.005, 0.001, 0.003])
        calls = []

        def fn(i):
            calls.append(i)
            torch.cuda.log.append("call %d" % i)

        us = torch_timing.median_us(torch, fn, runs=3, warmup=2)
        self.assertAlmostEqual(us, 3.0)  # ms to us: the median of 5, 1, 3
        self.assertEqual(calls, [0, 1, 2, 3, 4])
        self.assertEqual(torch.cuda.log, ["call 0", "call 1",
                                          "record", "call 2", "record",
                                          "record", "call 3", "record",
                                          "record", "call 4", "record"])
        self.assertEqual(torch.cuda.synced, 1)

    def test_median_us_refuses_no_runs(self):
        with self.assertRaises(ValueError):
            torch_timing.median_us(FakeTorch([]), lambda i: None, runs=0)

    def test_sets_for_passes_the_cold_bytes_with_at_least_two(self):
        self.assertEqual(torch_timing.sets_for(1e9), 2)
        self.assertEqual(torch_timing.sets_for(100e6), 6)
        self.assertEqual(torch_timing.sets_for(99e6), 7)  # 6 x 99 MB = 594 MB < 600 MB


if __name__ == "__main__":
    junit_unittest.main()
