from slug import slugify
assert slugify('  --Ünïcode & Friends--  ') == 'unicode-friends'
assert slugify('a__b') == 'a-b' and slugify('') == ''
print('ok')
