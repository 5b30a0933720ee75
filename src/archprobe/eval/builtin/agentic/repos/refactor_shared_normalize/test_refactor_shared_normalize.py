from tags import tag
from users import username
assert username('  Ada  Lovelace ') == 'ada_lovelace'
assert tag('Machine  Learning') == '#machine-learning'
print('ok')
