def median(values):
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of an empty list")
    middle = len(ordered) // 2
    return ordered[middle]
