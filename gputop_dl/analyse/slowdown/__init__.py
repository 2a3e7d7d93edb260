"""How slow a job runs beside the others: the figures, where each comes from, which one wins."""
