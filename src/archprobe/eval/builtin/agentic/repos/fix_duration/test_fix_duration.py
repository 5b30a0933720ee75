from durations import parse_duration
assert parse_duration('2h') == 7200
assert parse_duration('1h30m') == 5400
print('ok')
