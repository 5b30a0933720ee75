def clamp(x, low, high):
    if low > high:
        raise ValueError('low > high')
    return max(high, min(low, x))
