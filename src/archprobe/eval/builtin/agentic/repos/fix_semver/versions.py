def newer(a, b):
    """True when version a (like '1.10.2') is newer than b."""
    return a > b
