from search import find
assert find([1, 3, 5], 3) == 1
assert find([1, 3, 5], 5) == 2
print('ok')
