"""Work beside the requests: the background jobs loop, their recorded runs, per-project vector indexes, reembed."""
