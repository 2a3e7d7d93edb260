"""The training jobs: finding them, who may be read, their ranks, loader work and cache keys, as rows."""
