from calendar_rules import is_leap
assert is_leap(2000) and is_leap(1600)
assert not is_leap(2100) and not is_leap(1800)
assert is_leap(1996)
print('ok')
