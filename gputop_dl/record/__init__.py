"""Recording: the SQLite session store."""
