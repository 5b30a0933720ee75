from intervals import merge
assert merge([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]
print('ok')
