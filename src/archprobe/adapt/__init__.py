"""`archprobe adapt`: which inference frameworks can run this checkpoint, feature by feature.

Kept apart from what the weights say: `inspect` reports the structure; `adapt` asks each installed
framework's own registries and loading rules whether it knows that structure.
"""
