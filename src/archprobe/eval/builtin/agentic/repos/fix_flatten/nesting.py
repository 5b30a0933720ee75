def flatten(items):
    """Every non-list, non-tuple value of a nested structure, in order."""
    out = []
    for x in items:
        if isinstance(x, list):
            out.extend(x)
        else:
            out.append(x)
    return out
