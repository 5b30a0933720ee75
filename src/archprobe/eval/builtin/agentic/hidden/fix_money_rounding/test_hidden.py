from decimal import Decimal
from invoice import total
from pricing import with_tax
assert Decimal(str(with_tax(Decimal('0.125'), Decimal('0')))) == Decimal('0.13')
assert total([('2.675', 1)], 0) == '2.68'
assert total([('1.005', 1), ('0.015', 1)], 0) == '1.03'
print('ok')
