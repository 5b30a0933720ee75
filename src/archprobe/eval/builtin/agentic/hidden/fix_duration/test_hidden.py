from durations import parse_duration
assert parse_duration('45s') == 45 and parse_duration('1m') == 60
assert parse_duration('1h2m3s') == 3723
try:
    parse_duration('soon')
    raise SystemExit('no error')
except ValueError:
    pass
print('ok')
