import contextlib, io
from sorttool import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    main(['--reverse', 'b', 'c', 'a'])
assert buf.getvalue() == 'c\nb\na\n'
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    main(['x', 'y'])
assert buf.getvalue() == 'x\ny\n'
print('ok')
