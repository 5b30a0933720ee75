import contextlib, io
from sorttool import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    main(['b', 'a'])
assert buf.getvalue() == 'a\nb\n'
print('ok')
