from bounds import clamp
assert clamp(5, 0, 10) == 5
print('ok')
