from roman import from_roman
assert from_roman('MCMXCIV') == 1994 and from_roman('XC') == 90 and from_roman('MMXXIV') == 2024
assert from_roman('CDXLIV') == 444
print('ok')
