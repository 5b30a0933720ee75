from deps import toposort
g = {'app': ['lib', 'log'], 'lib': ['log', 'util'], 'log': [], 'util': ['log'], 'extra': []}
order = toposort(g)
assert sorted(order) == sorted(set(g) | {d for v in g.values() for d in v})
for n, deps in g.items():
    assert all(order.index(d) < order.index(n) for d in deps)
assert toposort({'x': ['y']}) == ['y', 'x']
try:
    toposort({'a': ['b'], 'b': ['a']})
    raise SystemExit('no error on a cycle')
except ValueError:
    pass
print('ok')
