def toposort(graph):
    """{'b': ['a']} -> ['a', 'b']. Raise ValueError on a cycle."""
    raise NotImplementedError
