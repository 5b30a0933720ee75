def calc_total(items):
    """items: [(price, qty)]."""
    return sum(p * q for p, q in items)
