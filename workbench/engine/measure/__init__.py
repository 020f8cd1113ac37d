"""The measurement itself (worker side): timing, statistics, bars, traffic, clocks, profile, counters."""
