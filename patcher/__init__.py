"""The cli.js patcher: locate Claude Code's cli.js, plan the edits, verify them, write them
atomically with a byte-exact backup, and read what a cli.js or native build does (``inspect``)."""
