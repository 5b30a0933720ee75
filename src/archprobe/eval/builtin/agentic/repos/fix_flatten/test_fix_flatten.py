from nesting import flatten
assert flatten([1, [2, 3]]) == [1, 2, 3]
assert flatten([1, [2, [3]]]) == [1, 2, 3]
print('ok')
