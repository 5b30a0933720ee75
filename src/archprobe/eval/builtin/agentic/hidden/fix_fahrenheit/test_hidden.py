from temperature import to_celsius, to_fahrenheit
assert to_fahrenheit(0) == 32 and to_fahrenheit(-40) == -40
for c in (-10, 0, 37, 100):
    assert abs(to_celsius(to_fahrenheit(c)) - c) < 1e-9
print('ok')
