from deps import toposort
assert toposort({'b': ['a'], 'a': []}) == ['a', 'b']
print('ok')
