from words import word_count
assert word_count('a  b') == 2
print('ok')
