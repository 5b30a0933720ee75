from slug import slugify
assert slugify('Hello World') == 'hello-world'
assert slugify('Crème Brûlée!') == 'creme-brulee'
print('ok')
