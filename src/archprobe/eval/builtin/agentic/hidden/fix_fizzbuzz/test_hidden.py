from fizz import fizzbuzz
assert [fizzbuzz(i) for i in (1, 3, 5, 30, 45, 7)] == ['1', 'Fizz', 'Buzz', 'FizzBuzz', 'FizzBuzz', '7']
print('ok')
