from versions import newer
assert newer('2.0.0', '1.99.99') and not newer('1.2.3', '1.2.3') and not newer('0.9.1', '0.10.0')
assert newer('1.2.10', '1.2.9')
print('ok')
