"""Job scheduling on one machine: job and slot values, the policies, the simulator, trace files.

`model.py` holds the values (jobs, running jobs, the machine, the ordered waiting queue);
`policies.py` the one decision function that both the simulator and a live queue call;
`simulate.py` the discrete-event simulator; `config/trace.py` the trace file loader. Nothing here
imports the engine, torch or textual.
"""

POLICIES = ("fifo", "fifo-backfill", "sjf", "priority", "lyapunov")  # policies.py decides; here
# so that the command line lists them without importing the scheduler
