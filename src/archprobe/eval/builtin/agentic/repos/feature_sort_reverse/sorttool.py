import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(prog='sorttool')
    parser.add_argument('words', nargs='*')
    args = parser.parse_args(argv)
    for w in sorted(args.words):
        print(w)
    return 0
