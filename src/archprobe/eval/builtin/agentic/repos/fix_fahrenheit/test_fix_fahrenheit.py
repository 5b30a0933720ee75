from temperature import to_fahrenheit
assert to_fahrenheit(100) == 212
print('ok')
