from invoice import total
assert total([('10.00', 1)], 0.1) == '11.00'
print('ok')
