"""The live verdict: each job's waits and its estimate, tick by tick, with no baseline and no pause."""
