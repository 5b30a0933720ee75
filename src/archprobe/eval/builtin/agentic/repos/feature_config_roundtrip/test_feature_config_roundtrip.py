from config import Config
c = Config('x', 2)
assert Config.from_dict(c.to_dict()) == c
print('ok')
