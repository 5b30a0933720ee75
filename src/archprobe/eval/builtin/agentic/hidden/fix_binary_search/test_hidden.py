from search import find
xs = list(range(0, 200, 2))
assert all(find(xs, v) == i for i, v in enumerate(xs))
assert find(xs, 7) == -1 and find([], 1) == -1 and find([4], 4) == 0 and find(xs, 500) == -1
print('ok')
