def split_fields(line):
    """'a,"b,c",d' -> ['a', 'b,c', 'd'] (double quotes group, and are removed)."""
    return [f.strip('"') for f in line.split(',')]
