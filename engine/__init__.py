"""Pure-Python reference model of Claude Code's compaction logic."""
