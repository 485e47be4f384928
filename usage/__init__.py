"""What your sessions really used and cost: the price table (``usage.prices``), the per-request
ledger the gateway and the injected code write (``usage.ledger``), and ``ctxpatch report``."""
