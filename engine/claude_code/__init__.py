"""What Claude Code does to its own context, per version (the rules in ``engine.profiles``):
the thresholds, the count behind them, micro-compaction, full compaction, session memory,
attachments and the flattening of messages into the request."""
