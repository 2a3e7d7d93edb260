"""Step statistics: step time, samples/s, data stall, and the step's phases."""
