"""Python twins of the JavaScript ctxpatch injects (held to node by tests/differential): the
server-side clearing edit (``context_clear``), its online policy (``policy``) and the
thinking-safe text prune (``textprune*``)."""
