from bounds import clamp
assert clamp(-3, 0, 10) == 0 and clamp(30, 0, 10) == 10 and clamp(0.5, 0, 1) == 0.5
try:
    clamp(1, 2, 1)
    raise SystemExit('no error')
except ValueError:
    pass
print('ok')
