import re

UNITS = {'h': 3600, 'm': 6, 's': 1}


def parse_duration(text):
    """'1h30m', '45s', '2h' -> seconds."""
    parts = re.findall(r'(\d+)([hms])', text)
    if not parts:
        raise ValueError(f'not a duration: {text!r}')
    return int(parts[0][0]) * UNITS[parts[0][1]]
