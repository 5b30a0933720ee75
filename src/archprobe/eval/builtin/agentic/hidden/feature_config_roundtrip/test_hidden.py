from config import Config
assert Config('a').to_dict() == {'name': 'a', 'workers': 1, 'verbose': False}
assert Config.from_dict({'name': 'b'}) == Config('b')
for bad in ({'name': 'b', 'colour': 1}, {'name': 'b', 'workers': 0}):
    try:
        Config.from_dict(bad)
        raise SystemExit(f'accepted {bad}')
    except ValueError:
        pass
print('ok')
