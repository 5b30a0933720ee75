from stats import median
assert median([10, 20]) == 15
assert median([5]) == 5
assert median([1, 2, 3, 4, 5, 6]) == 3.5
try:
    median([])
    raise SystemExit('no error for empty')
except ValueError:
    pass
print('ok')
