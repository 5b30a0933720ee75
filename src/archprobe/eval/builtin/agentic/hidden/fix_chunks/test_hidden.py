from chunking import chunks
assert chunks([], 3) == []
assert chunks([1], 5) == [[1]]
assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
print('ok')
