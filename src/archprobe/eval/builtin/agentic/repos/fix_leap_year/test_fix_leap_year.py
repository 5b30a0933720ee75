from calendar_rules import is_leap
assert is_leap(2024) and not is_leap(2023)
assert not is_leap(1900)
print('ok')
