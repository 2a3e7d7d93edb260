"""Pure analysis: recorded samples and events in, metrics and verdicts out."""
