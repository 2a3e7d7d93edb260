"""What py-spy tells of a process: bursts and dumps, their stacks, the stall and loop-counter samplers."""
