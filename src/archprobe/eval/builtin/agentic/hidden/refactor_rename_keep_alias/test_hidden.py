import warnings
from orders import calc_total, total
assert total([]) == 0 and total([(1.5, 2)]) == 3.0
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    assert calc_total([(2, 2)]) == 4
assert any(issubclass(w.category, DeprecationWarning) for w in caught)
print('ok')
