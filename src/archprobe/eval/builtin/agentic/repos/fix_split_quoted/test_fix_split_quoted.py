from fields import split_fields
assert split_fields('a,b') == ['a', 'b']
assert split_fields('a,"b,c",d') == ['a', 'b,c', 'd']
print('ok')
