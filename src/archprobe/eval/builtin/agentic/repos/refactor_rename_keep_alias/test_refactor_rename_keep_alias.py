from orders import total
assert total([(2, 3), (1, 1)]) == 7
print('ok')
