import tags, users
from textutil import normalize
assert normalize('  A  b ') == 'a b'
assert not hasattr(users, '_normalize') and not hasattr(tags, '_normalize')
assert 'textutil' in open(users.__file__).read() and 'textutil' in open(tags.__file__).read()
assert users.username(' X  Y ') == 'x_y' and tags.tag(' X  Y ') == '#x-y'
print('ok')
