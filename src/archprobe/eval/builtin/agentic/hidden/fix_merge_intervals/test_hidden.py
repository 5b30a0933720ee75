from intervals import merge
assert merge([[8, 10], [1, 3], [2, 6]]) == [[1, 6], [8, 10]]
assert merge([[1, 4], [4, 5]]) == [[1, 5]]
assert merge([]) == []
assert merge([[5, 7], [1, 2], [1, 10]]) == [[1, 10]]
print('ok')
