def _normalize(s):
    return ' '.join(s.strip().lower().split())


def username(s):
    return _normalize(s).replace(' ', '_')
