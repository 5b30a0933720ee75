def chunks(xs, n):
    """Split xs into lists of n items (the last may be shorter)."""
    return [xs[i:i + n] for i in range(0, len(xs) - n + 1, n)]
