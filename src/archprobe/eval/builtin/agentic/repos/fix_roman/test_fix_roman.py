from roman import from_roman
assert from_roman('III') == 3 and from_roman('IV') == 4
print('ok')
