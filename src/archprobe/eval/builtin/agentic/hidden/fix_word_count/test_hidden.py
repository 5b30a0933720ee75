from words import word_count
assert word_count('') == 0
assert word_count(' one\ttwo\nthree  ') == 3
assert word_count('single') == 1
print('ok')
