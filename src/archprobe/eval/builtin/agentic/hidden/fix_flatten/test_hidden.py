from nesting import flatten
assert flatten([(1, [2, (3, 4)]), [], 'ab']) == [1, 2, 3, 4, 'ab']
assert flatten([]) == []
print('ok')
