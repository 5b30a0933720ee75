"""`archprobe eval`: run evaluations with the nine-check method (../shared/spec/evaluation.md),
keep every attempt in a SQLite ledger, and audit other people's claims against the same checks.
"""
