import fields
assert fields.split_fields('') == ['']
assert fields.split_fields('"x,y,z"') == ['x,y,z']
assert fields.split_fields('1,,"2"') == ['1', '', '2']
src = open(fields.__file__).read()
assert 'import csv' not in src
print('ok')
