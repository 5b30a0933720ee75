from lru import LRU
c = LRU(3)
for k in 'abc':
    c.put(k, k)
c.get('a')
c.get('b')
c.put('d', 'd')
assert c.get('c') is None and c.get('a') == 'a'
c.put('a', 'A')
c.put('e', 'e')
assert c.get('a') == 'A' and c.get('b') is None
print('ok')
