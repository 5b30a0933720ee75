from lru import LRU
c = LRU(2)
c.put('a', 1)
c.put('b', 2)
assert c.get('a') == 1
c.put('c', 3)
assert c.get('a') == 1 and c.get('b') is None
print('ok')
