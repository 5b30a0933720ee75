from stack import EmptyStack, Stack
assert issubclass(EmptyStack, IndexError)
s = Stack()
for op in (s.pop, s.peek):
    try:
        op()
        raise SystemExit('no error')
    except EmptyStack:
        pass
s.push('a')
s.push('b')
assert s.peek() == 'b' and len(s) == 2 and s.pop() == 'b' and s.peek() == 'a'
print('ok')
