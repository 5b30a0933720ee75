def _normalize(s):
    return ' '.join(s.strip().lower().split())


def tag(s):
    return '#' + _normalize(s).replace(' ', '-')
