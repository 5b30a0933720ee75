from versions import newer
assert newer('1.10.0', '1.9.0')
print('ok')
