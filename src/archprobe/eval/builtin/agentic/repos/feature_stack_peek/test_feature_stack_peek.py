from stack import Stack
s = Stack()
s.push(1)
assert s.pop() == 1
print('ok')
