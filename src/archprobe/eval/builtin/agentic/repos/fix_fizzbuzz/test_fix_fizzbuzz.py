from fizz import fizzbuzz
assert fizzbuzz(15) == 'FizzBuzz'
print('ok')
