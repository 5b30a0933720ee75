from chunking import chunks
assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]
assert chunks([1, 2, 3], 2) == [[1, 2], [3]]
print('ok')
