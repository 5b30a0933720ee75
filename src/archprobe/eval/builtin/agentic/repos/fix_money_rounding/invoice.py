from pricing import with_tax


def total(lines, rate):
    """lines: [(unit price as str, quantity)]; returns a str with two decimals."""
    return f"{sum(with_tax(float(p) * q, rate) for p, q in lines):.2f}"
