"""The verdict's thresholds that its presenters show too, in a module that imports nothing.

The jobs table colours a slowdown by SLOW, and shows the mean step beside the median when they
are MEAN_APART; importing them from here keeps the verdict's code off the monitor's first frame.
"""

SLOW = 1.10  # s_i above this: the job was slowed
# a job the live verdict took for slowed stays so until its estimate falls to this: one that
# hovers about SLOW does not flip the header (and the recorded changes) every few ticks
SLOW_STAY = 1.05
MEAN_APART = 0.10  # the mean-step ratio is shown beside the median's when 10 % or more apart
